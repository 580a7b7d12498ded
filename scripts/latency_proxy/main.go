// Command latency_proxy is a loopback HTTP reverse proxy for the integration tests: it waits
// -delay-ms before forwarding each request to -target (an S3 server), so tests can see how the
// extension behaves against a slow object store.
//
// The incoming Host header is passed through unchanged, so an AWS SigV4 signature made for the
// proxy's address (which signs the Host header) still verifies at the target. Request and
// response bodies are streamed, not buffered. Standard library only.
//
//	latency_proxy -listen 127.0.0.1:0 -target http://127.0.0.1:7070 -delay-ms 50
//
// Prints "listening on http://127.0.0.1:PORT" on stdout once it accepts connections, then serves
// until SIGINT/SIGTERM.
//
// With -ignore-conditional, a 412 Precondition Failed from the server is answered 200 OK: the
// client sees what a store that ignores If-None-Match / If-Match would answer (the headers are
// signed, so they cannot simply be dropped).
//
// With -fail-commits before|after (in front of an Iceberg REST catalog), every POST to a
// `…/tables/<name>` path is answered 503: `before` without forwarding it (the commit never
// reaches the catalog), `after` once the catalog has answered (the commit landed, the client
// cannot know).
//
// With -fail-put-before SUBSTRING, every PUT whose path contains SUBSTRING is answered 503 without
// being forwarded (a write that never lands). With -fail-put-after-once SUBSTRING, the first such
// PUT is forwarded and, once the server has answered, answered 503 (a write that landed while the
// client saw an error, and retries it); later ones pass through.
//
// With -slowdown-every N, every Nth request is answered 503 SlowDown (S3's throttling reply)
// without being forwarded. GET /_proxy/stats (never forwarded) answers
// {"requests": …, "max_in_flight": …, "slowdowns": …}: how many requests arrived, the most that
// were in flight at once, and how many were throttled.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "listen address (loopback), port 0 picks a free one")
	target := flag.String("target", "", "upstream base URL, e.g. http://127.0.0.1:7070")
	delayMs := flag.Int("delay-ms", 0, "delay added before forwarding every request, in milliseconds")
	slowdownEvery := flag.Int("slowdown-every", 0, "answer every Nth request 503 SlowDown (0: never)")
	failCommits := flag.String("fail-commits", "", "answer POST …/tables/<name> 503: before or after forwarding it")
	ignoreConditional := flag.Bool("ignore-conditional", false, "answer 412 as 200 (a store without conditional writes)")
	failPutBefore := flag.String("fail-put-before", "", "answer every PUT whose path contains this 503, unforwarded")
	failPutAfterOnce := flag.String("fail-put-after-once", "", "answer the first PUT whose path contains this 503, after forwarding it")
	flag.Parse()
	var putFailedAfter atomic.Bool
	failsAfter := func(r *http.Request) bool {
		return *failPutAfterOnce != "" && r != nil && r.Method == http.MethodPut &&
			strings.Contains(r.URL.Path, *failPutAfterOnce) && putFailedAfter.CompareAndSwap(false, true)
	}

	if *target == "" {
		log.Fatal("latency_proxy: -target is required")
	}
	up, err := url.Parse(*target)
	if err != nil || up.Scheme == "" || up.Host == "" {
		log.Fatalf("latency_proxy: bad -target %q", *target)
	}
	if *delayMs < 0 {
		log.Fatal("latency_proxy: -delay-ms must be >= 0")
	}
	delay := time.Duration(*delayMs) * time.Millisecond

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil // never route loopback traffic through an environment proxy
	transport.DisableCompression = true
	transport.MaxIdleConnsPerHost = 64

	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(up)
			// SetURL sets Host to the target's; keep the client's, which the signature covers.
			// (Rewrite, unlike Director, adds no X-Forwarded-* headers.)
			r.Out.Host = r.In.Host

		},
		ModifyResponse: func(resp *http.Response) error {
			if (*failCommits == "after" && isCommit(resp.Request)) || failsAfter(resp.Request) {
				resp.StatusCode = http.StatusServiceUnavailable
				resp.Status = "503 Service Unavailable"
				resp.Body = http.NoBody
				resp.ContentLength = 0
				resp.Header.Del("Content-Length")
				return nil
			}
			if *ignoreConditional && resp.StatusCode == http.StatusPreconditionFailed {
				resp.StatusCode = http.StatusOK
				resp.Status = "200 OK"
				resp.Body = http.NoBody
				resp.ContentLength = 0
				resp.Header.Del("Content-Length")
				resp.Header.Set("ETag", `"00000000000000000000000000000000"`)
			}
			return nil
		},
		Transport:     transport,
		FlushInterval: -1,
		ErrorLog:      log.New(os.Stderr, "latency_proxy: ", log.LstdFlags),
	}

	var requests, slowdowns atomic.Int64
	var mu sync.Mutex
	inFlight, maxInFlight := 0, 0
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_proxy/stats" {
			mu.Lock()
			most := maxInFlight
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"requests": %d, "max_in_flight": %d, "slowdowns": %d}`, requests.Load(), most, slowdowns.Load())
			return
		}
		n := requests.Add(1)
		mu.Lock()
		inFlight++
		if inFlight > maxInFlight {
			maxInFlight = inFlight
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		if (*failCommits == "before" && isCommit(r)) ||
			(*failPutBefore != "" && r.Method == http.MethodPut && strings.Contains(r.URL.Path, *failPutBefore)) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if *slowdownEvery > 0 && n%int64(*slowdownEvery) == 0 {
			slowdowns.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		rp.ServeHTTP(w, r)
	})

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("latency_proxy: listen %s: %v", *listen, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second}

	fmt.Printf("listening on http://%s\n", ln.Addr().String())
	os.Stdout.Sync()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatalf("latency_proxy: %v", err)
	}
}

// isCommit tells an Iceberg REST commit: POST …/namespaces/<ns>/tables/<name>.
func isCommit(r *http.Request) bool {
	if r == nil || r.Method != http.MethodPost {
		return false
	}
	i := strings.LastIndex(r.URL.Path, "/tables/")
	return i >= 0 && !strings.Contains(r.URL.Path[i+len("/tables/"):], "/")
}
