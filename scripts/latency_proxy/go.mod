module lakehouse/latency_proxy

go 1.22
