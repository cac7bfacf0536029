//! arrow-avro's Decoder over the values file bench/avro_anchor.py writes (its format is
//! documented there): every block decompressed (zstd blocks) and decoded into Arrow record batches
//! through a schema store keyed by Confluent ids. Prints one JSON line: rows, the seconds of each
//! timed repeat (after one warm-up) and checks of the output the Python side compares with its own.
use std::time::Instant;

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_avro::reader::ReaderBuilder;
use arrow_avro::schema::{AvroSchema, Fingerprint, FingerprintAlgorithm, SchemaStore};
use arrow_schema::DataType;

struct Block {
    codec: u8,
    rows: u32,
    raw_len: usize,
    bytes: Vec<u8>,
}

/// This thread's CPU seconds (the machine is shared: wall time counts other processes' turns).
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn u32le(b: &[u8], at: &mut usize) -> u32 {
    let v = u32::from_le_bytes(b[*at..*at + 4].try_into().unwrap());
    *at += 4;
    v
}

/// A column's check: rows, nulls, and a sum over its values (ints, lengths of strings and lists).
fn column_check(a: &ArrayRef) -> (usize, i64) {
    let nulls = a.null_count();
    let mut sum: i64 = 0;
    match a.data_type() {
        DataType::Int64 => {
            let a = a.as_any().downcast_ref::<arrow_array::Int64Array>().unwrap();
            for v in a.iter().flatten() {
                sum = sum.wrapping_add(v);
            }
        }
        DataType::Int32 => {
            let a = a.as_any().downcast_ref::<arrow_array::Int32Array>().unwrap();
            for v in a.iter().flatten() {
                sum = sum.wrapping_add(v as i64);
            }
        }
        DataType::Utf8 => {
            let a = a.as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
            for v in a.iter().flatten() {
                sum = sum.wrapping_add(v.len() as i64);
            }
        }
        DataType::Timestamp(_, _) => {
            let a = a.as_any().downcast_ref::<arrow_array::TimestampMillisecondArray>();
            if let Some(a) = a {
                for v in a.iter().flatten() {
                    sum = sum.wrapping_add(v);
                }
            }
        }
        DataType::List(_) => {
            let a = a.as_any().downcast_ref::<arrow_array::ListArray>().unwrap();
            for i in 0..a.len() {
                if a.is_valid(i) {
                    sum = sum.wrapping_add(a.value_length(i) as i64);
                }
            }
        }
        _ => {}
    }
    (nulls, sum)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: avro_anchor FILE REPEATS [BATCH_SIZE] [PROJECTION: comma-separated field indexes]");
        std::process::exit(2);
    }
    let data = std::fs::read(&args[1]).expect("read the values file");
    let repeats: usize = args[2].parse().expect("REPEATS");
    let batch_size: usize = args.get(3).map(|s| s.parse().expect("BATCH_SIZE")).unwrap_or(8192);
    let projection: Option<Vec<usize>> = args
        .get(4)
        .filter(|s| !s.is_empty())
        .map(|s| s.split(',').map(|x| x.parse().expect("PROJECTION")).collect());

    assert_eq!(&data[..6], b"KBAV1\n", "not a values file");
    let mut at = 6;
    let nschemas = u32le(&data, &mut at);
    let mut schemas = Vec::new();
    for _ in 0..nschemas {
        let id = u32le(&data, &mut at);
        let len = u32le(&data, &mut at) as usize;
        let text = String::from_utf8(data[at..at + len].to_vec()).unwrap();
        at += len;
        schemas.push((id, text));
    }
    let reader_len = u32le(&data, &mut at) as usize;
    let reader_text = String::from_utf8(data[at..at + reader_len].to_vec()).unwrap();
    at += reader_len;
    let mut blocks = Vec::new();
    while at < data.len() {
        let codec = data[at];
        at += 1;
        let rows = u32le(&data, &mut at);
        let raw_len = u32le(&data, &mut at) as usize;
        let stored = u32le(&data, &mut at) as usize;
        blocks.push(Block { codec, rows, raw_len, bytes: data[at..at + stored].to_vec() });
        at += stored;
    }
    let total_rows: u64 = blocks.iter().map(|b| b.rows as u64).sum();
    let raw_bytes: u64 = blocks.iter().map(|b| b.raw_len as u64).sum();

    let build = || {
        let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
        for (id, text) in &schemas {
            store.set(Fingerprint::Id(*id), AvroSchema::new(text.clone())).unwrap();
        }
        let mut b = ReaderBuilder::new().with_writer_schema_store(store).with_batch_size(batch_size);
        if !reader_text.is_empty() {
            b = b.with_reader_schema(AvroSchema::new(reader_text.clone()));
        }
        if let Some(p) = &projection {
            b = b.with_projection(p.clone());
        }
        b.build_decoder().expect("a decoder")
    };

    let run = |keep: bool| -> (u64, Vec<RecordBatch>) {
        let mut dec = build();
        let mut buf: Vec<u8> = Vec::new();
        let mut zd = zstd::bulk::Decompressor::new().expect("a zstd context"); // one context, reused
        let mut rows = 0u64;
        let mut out = Vec::new();
        for b in &blocks {
            let bytes: &[u8] = if b.codec == 1 {
                buf.clear();
                buf.reserve(b.raw_len);
                zd.decompress_to_buffer(&b.bytes[..], &mut buf).expect("zstd");
                &buf
            } else {
                &b.bytes
            };
            let mut pos = 0;
            while pos < bytes.len() {
                let n = dec.decode(&bytes[pos..]).expect("decode");
                pos += n;
                if dec.batch_is_full() {
                    let batch = dec.flush().unwrap().unwrap();
                    rows += batch.num_rows() as u64;
                    if keep {
                        out.push(batch);
                    }
                }
            }
        }
        if let Some(batch) = dec.flush().unwrap() {
            rows += batch.num_rows() as u64;
            if keep {
                out.push(batch);
            }
        }
        (rows, out)
    };

    // the warm-up run also gives the checks
    let (rows, batches) = run(true);
    assert_eq!(rows, total_rows, "rows decoded");
    let ncols = batches.first().map(|b| b.num_columns()).unwrap_or(0);
    let mut checks = vec![(0usize, 0i64); ncols];
    for b in &batches {
        for (i, c) in b.columns().iter().enumerate() {
            let (n, s) = column_check(c);
            checks[i].0 += n;
            checks[i].1 = checks[i].1.wrapping_add(s);
        }
    }
    let names: Vec<String> = batches
        .first()
        .map(|b| b.schema().fields().iter().map(|f| format!("{:?}", f.name())).collect())
        .unwrap_or_default();
    drop(batches);
    let mut secs = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..repeats {
        let t = Instant::now();
        let c = thread_cpu();
        let (r, _) = run(false);
        cpu.push(thread_cpu() - c);
        secs.push(t.elapsed().as_secs_f64());
        assert_eq!(r, total_rows);
    }
    let checks_json: Vec<String> = checks
        .iter()
        .zip(names.iter())
        .map(|((n, s), name)| format!("[{},{},{}]", name, n, s))
        .collect();
    let secs_json: Vec<String> = secs.iter().map(|s| format!("{:.6}", s)).collect();
    let cpu_json: Vec<String> = cpu.iter().map(|s| format!("{:.6}", s)).collect();
    println!(
        "{{\"rows\":{},\"raw_bytes\":{},\"batch_size\":{},\"seconds\":[{}],\"cpu_seconds\":[{}],\"checks\":[{}]}}",
        total_rows,
        raw_bytes,
        batch_size,
        secs_json.join(","),
        cpu_json.join(","),
        checks_json.join(",")
    );
}
