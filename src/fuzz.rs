//! Fuzzing of the readers of what other programs wrote (test builds only), on the stable
//! toolchain: each target's seeds are real files (`test/fuzz/corpus/<target>/`: manifest lists
//! and manifests by Impala, Java and Spark 4 (v1–v3), metadata by Impala, Spark 4 and Trino,
//! Delta commits from the Delta acceptance tables, webhook bodies), mutated — bytes flipped, set
//! to boundary values, spans deleted, repeated, spliced from another seed, Avro varints replaced
//! by huge or negative ones, truncated; JSON seeds also structurally (a value of another type, a
//! key dropped, a number made extreme) — and fed to the reader under `catch_unwind` ([`crate::error::without_panic`]). A panic
//! (which across the FFI boundary kills the user's DuckDB) fails the test and saves its input in
//! `test/fuzz/crashes/`; an input found once becomes a regression seed in the corpus.
//!
//! `cargo test --lib fuzz` runs [`DEFAULT_EXECUTIONS`] per target (seconds); `make fuzz` sets
//! `LAKEHOUSE_FUZZ_SECONDS` and runs each target that long, printing executions and the distinct
//! outcomes seen (a coarse stand-in for coverage: how many different ways the reader answered).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iceberg::spec::FormatVersion;
use serde_json::Value;

use crate::table::iceberg::{list_reader, manifest, manifest_reader, parse_manifest_list, parse_metadata};

/// Mutated inputs per target in a plain `cargo test`.
pub const DEFAULT_EXECUTIONS: u64 = 3_000;

/// xorshift64*: seeded, reproducible, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

/// Bytes an Avro varint of `value` takes (zig-zag), for the varint mutation.
fn varint(value: i64) -> Vec<u8> {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    let mut out = Vec::new();
    loop {
        if n < 0x80 {
            out.push(n as u8);
            return out;
        }
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
}

const BOUNDARY_BYTES: [u8; 6] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff];
const BOUNDARY_LONGS: [i64; 7] = [-1, 0, 1, i32::MAX as i64, i64::MAX, i64::MIN, 1 << 40];

/// One byte-level mutation of `input` (another seed `other` for splices).
fn mutate_bytes(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8]) {
    if input.is_empty() {
        input.push(rng.next() as u8);
        return;
    }
    let at = rng.below(input.len());
    match rng.below(8) {
        0 => input[at] ^= 1 << rng.below(8),
        1 => input[at] = BOUNDARY_BYTES[rng.below(BOUNDARY_BYTES.len())],
        2 => {
            let end = (at + 1 + rng.below(64)).min(input.len());
            input.drain(at..end);
        }
        3 => {
            let end = (at + 1 + rng.below(64)).min(input.len());
            let span: Vec<u8> = input[at..end].to_vec();
            input.splice(at..at, span);
        }
        4 => {
            let from = rng.below(other.len().max(1));
            let end = (from + 1 + rng.below(256)).min(other.len());
            let span = other.get(from..end).unwrap_or_default().to_vec();
            input.splice(at..(at + span.len()).min(input.len()), span);
        }
        5 => {
            let bytes = varint(BOUNDARY_LONGS[rng.below(BOUNDARY_LONGS.len())]);
            let end = (at + bytes.len()).min(input.len());
            input.splice(at..end, bytes);
        }
        6 => input.truncate(at),
        _ => {
            let b = rng.next() as u8;
            input.insert(at, b);
        }
    }
}

/// One structural mutation of a JSON document: a value `depth` levels down (or where the tree
/// ends) replaced by one of another kind or an extreme one, or a key dropped.
fn mutate_json(rng: &mut Rng, value: &mut Value, depth: usize) {
    if depth > 0 {
        match value {
            Value::Object(map) if !map.is_empty() => {
                let key = map.keys().nth(rng.below(map.len())).cloned().unwrap_or_default();
                if rng.below(5) == 0 {
                    map.remove(&key);
                    return;
                }
                if let Some(child) = map.get_mut(&key) {
                    return mutate_json(rng, child, depth - 1);
                }
            }
            Value::Array(items) if !items.is_empty() => {
                let i = rng.below(items.len());
                return mutate_json(rng, &mut items[i], depth - 1);
            }
            _ => {}
        }
    }
    *value = match rng.below(9) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => Value::from(BOUNDARY_LONGS[rng.below(BOUNDARY_LONGS.len())]),
        3 => Value::from(-1.5e308),
        4 => Value::from(""),
        5 => Value::Array(Vec::new()),
        6 => Value::Object(Default::default()),
        7 => Value::from("x".repeat(rng.below(64))),
        _ => Value::from(u64::MAX),
    };
}

/// A target: a name (its corpus folder) and the reader, which returns a short label of its
/// outcome (`ok 3 entries`, `refused`).
struct Target {
    name: &'static str,
    reader: &'static str,
    json: bool,
    read: fn(&[u8]) -> String,
}

fn outcome<T, E>(result: Result<T, E>, len: impl Fn(&T) -> usize) -> String {
    match result {
        Ok(v) => format!("ok {}", len(&v).min(8)),
        Err(_) => "refused".into(),
    }
}

fn versions() -> [FormatVersion; 3] {
    [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3]
}

const TARGETS: [Target; 7] = [
    Target {
        name: "manifest_list",
        reader: "our lean reader",
        json: false,
        read: |b| {
            versions()
                .map(|v| list_reader::read(b, v).map_or("none".into(), |l| format!("{}", l.len().min(8))))
                .join("/")
        },
    },
    Target {
        name: "manifest_list",
        reader: "iceberg-rust's reader",
        json: false,
        read: |b| versions().map(|v| outcome(parse_manifest_list(b, v), Vec::len)).join("/"),
    },
    Target {
        name: "manifest",
        reader: "our lean reader",
        json: false,
        read: |b| {
            manifest_reader::files(b)
                .map_or("none".into(), |(live, gone)| format!("{} {}", live.len().min(8), gone.len().min(8)))
        },
    },
    Target {
        name: "manifest",
        reader: "iceberg-rust's reader",
        json: false,
        read: |b| outcome(manifest::parse_avro(b), |m| m.entries().len()),
    },
    Target {
        name: "metadata",
        reader: "iceberg-rust's serde, our stand-ins",
        json: true,
        read: |b| outcome(parse_metadata(b, "fuzz.metadata.json"), |m| m.0.snapshots().len()),
    },
    Target {
        name: "delta_commit",
        reader: "our log re-encoding",
        json: false,
        read: |b| outcome(crate::table::delta::commit::reencode_commit(b), Vec::len),
    },
    Target {
        name: "webhook",
        reader: "our body check",
        json: true,
        read: |b| outcome(crate::functions::serve::server::parse_overrides(b), |m| m.len()),
    },
];

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("test/fuzz/corpus").join(name);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    files.sort();
    files.iter().filter_map(|f| std::fs::read(f).ok()).collect()
}

/// What a target's run saw.
#[derive(Debug)]
struct Run {
    executions: u64,
    outcomes: BTreeSet<String>,
    crash: Option<(PathBuf, String)>,
}

/// Runs `target` on mutations of its corpus: `executions` of them, or for `seconds`.
fn fuzz(target: &Target, index: usize, executions: u64, seconds: Option<u64>) -> Run {
    let seeds = corpus(target.name);
    assert!(!seeds.is_empty(), "no seed in test/fuzz/corpus/{}", target.name);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1));
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs(s));
    let mut run = Run { executions: 0, outcomes: BTreeSet::new(), crash: None };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // Every seed as it is first (regression seeds are inputs that once failed), then mutations.
    let mut unmutated = seeds.iter();
    while deadline.map_or(run.executions < executions, |d| Instant::now() < d) {
        if let Some(seed) = unmutated.next() {
            run.executions += 1;
            if let Err(message) = crate::error::without_panic(|| (target.read)(seed)) {
                run.crash = Some((PathBuf::from(format!("seed {}", run.executions)), message));
                break;
            }
            continue;
        }
        let seed = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())];
        let mut input = seed.clone();
        if target.json && rng.below(2) == 0 {
            if let Ok(mut value) = serde_json::from_slice::<Value>(seed) {
                for _ in 0..(1 + rng.below(3)) {
                    let depth = 1 + rng.below(6);
                    mutate_json(&mut rng, &mut value, depth);
                }
                input = serde_json::to_vec(&value).unwrap_or_default();
            }
        } else {
            for _ in 0..(1 + rng.below(4)) {
                mutate_bytes(&mut rng, &mut input, other);
            }
        }
        run.executions += 1;
        match crate::error::without_panic(|| (target.read)(&input)) {
            Ok(label) => {
                run.outcomes.insert(label);
            }
            Err(message) => {
                let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("test/fuzz/crashes");
                let _ = std::fs::create_dir_all(&dir);
                let path = dir.join(format!("{}-{index}-{}.bin", target.name, run.executions));
                let _ = std::fs::write(&path, &input);
                run.crash = Some((path, message));
                break;
            }
        }
    }
    std::panic::set_hook(hook);
    run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzz_every_reader_of_foreign_bytes() {
        let seconds = std::env::var("LAKEHOUSE_FUZZ_SECONDS").ok().and_then(|s| s.parse::<u64>().ok());
        let mut crashes = Vec::new();
        for (i, target) in TARGETS.iter().enumerate() {
            let run = fuzz(target, i, DEFAULT_EXECUTIONS, seconds);
            println!(
                "fuzz target {i} {} ({}): {} executions, {} distinct outcomes",
                target.name,
                target.reader,
                run.executions,
                run.outcomes.len()
            );
            if let Some((path, message)) = run.crash {
                crashes.push(format!("target {i} ({}) panicked: {message} (input: {})", target.name, path.display()));
            }
        }
        assert!(crashes.is_empty(), "{}", crashes.join("\n"));
    }

    #[test]
    fn mutations_are_reproducible_and_varints_zigzag() {
        assert_eq!(varint(0), vec![0]);
        assert_eq!(varint(-1), vec![1]);
        assert_eq!(varint(1), vec![2]);
        assert_eq!(varint(64), vec![0x80, 0x01]);
        let mut a = Rng(7);
        let mut b = Rng(7);
        assert!((0..100).all(|_| a.next() == b.next()));
    }
}
