//! The MindRecord reader on files MindSpore's `FileWriter` wrote
//! (`fixtures/records/make_records.py`), and on those files with lying headers.

use super::*;

fn fixture(name: &str) -> (PathBuf, Vec<u8>) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    let b = std::fs::read(&p).unwrap();
    (p, b)
}

/// The images make_records.py wrote, in row order.
fn written() -> Vec<(&'static str, Vec<u8>)> {
    ["one_pixel.jpg", "one_pixel.png", "gray.jpg"]
        .iter()
        .map(|n| (*n, fixture(&format!("edge/{n}")).1))
        .collect()
}

fn slice(b: &[u8], e: &RecordEntry) -> Vec<u8> {
    b[e.offset as usize..(e.offset + e.len) as usize].to_vec()
}

#[test]
fn reads_a_two_file_group_in_mindspore_order() {
    let (p1, b1) = fixture("records/small.mindrecord1");
    let h = read_header(&b1).unwrap();
    let files = group(&h, &p1).unwrap();
    let dir = p1.parent().unwrap();
    assert_eq!(
        files,
        [dir.join("small.mindrecord0"), dir.join("small.mindrecord1")]
    );
    let mut got = Vec::new();
    for f in &files {
        let b = std::fs::read(f).unwrap();
        for e in index(&b, &MindRecordOptions::default()).unwrap() {
            got.push((e.key.clone(), e.labels[0], slice(&b, &e)));
        }
    }
    let want: Vec<_> = written()
        .into_iter()
        .enumerate()
        .map(|(i, (n, d))| (n.to_string(), i as u32, d))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn finds_the_image_among_several_blob_columns() {
    let (_, b) = fixture("records/multi_blob.mindrecord");
    let idx = index(&b, &MindRecordOptions::default()).unwrap();
    let want = written();
    assert_eq!(idx.len(), 2);
    for (i, e) in idx.iter().enumerate() {
        assert_eq!(slice(&b, e), want[i].1);
        assert_eq!(e.labels[0], 7 - i as u32);
    }
    let mask = MindRecordOptions {
        image_column: "mask".into(),
        ..MindRecordOptions::default()
    };
    let idx = index(&b, &mask).unwrap();
    assert_eq!(slice(&b, &idx[1]), b"mm");
}

/// The fixture with its JSON header edited by `edit`, written back in place.
fn with_header(edit: impl FnOnce(&mut serde_json::Value)) -> (PathBuf, Vec<u8>) {
    let (p, mut b) = fixture("records/small.mindrecord1");
    let n = u64_le(&b[..8]) as usize;
    let mut v: serde_json::Value = serde_json::from_slice(&b[8..8 + n]).unwrap();
    edit(&mut v);
    let json = serde_json::to_vec(&v).unwrap();
    b[..8].copy_from_slice(&(json.len() as u64).to_le_bytes());
    b[8..8 + json.len()].copy_from_slice(&json);
    (p, b)
}

fn fault(_: &Path, b: &[u8]) -> String {
    index(b, &MindRecordOptions::default())
        .unwrap_err()
        .to_string()
}

/// An edit of the JSON header.
type Edit = dyn FnOnce(&mut serde_json::Value);

#[test]
fn lying_headers_are_typed_errors() {
    let (p, b) = fixture("records/small.mindrecord1");
    // The header length past the file, and JSON that is not a header.
    let mut bad = b.clone();
    bad[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(fault(&p, &bad).contains("not a MindRecord file"));
    assert!(fault(&p, &b[..5]).contains("not a MindRecord file"));
    let mut bad = b.clone();
    bad[8] = b'[';
    assert!(fault(&p, &bad).contains("not a MindRecord header"));
    let cases: Vec<(Box<Edit>, &str)> = vec![
        (
            Box::new(|v| v["page"][0]["page_id"] = serde_json::json!(1u64 << 62)),
            "page",
        ),
        (
            Box::new(|v| v["page"][0]["page_id"] = serde_json::json!(9)),
            "past the end of the file",
        ),
        (
            Box::new(|v| v["page"][0]["page_size"] = serde_json::json!(1u64 << 40)),
            "more bytes than page_size",
        ),
        (
            Box::new(|v| v["page"][0]["end_row_id"] = serde_json::json!(1000)),
            "fewer blobs than its rows",
        ),
        (
            Box::new(|v| v["page"][0]["start_row_id"] = serde_json::json!(1)),
            "row ids not contiguous",
        ),
        (
            Box::new(|v| v["page"][0]["end_row_id"] = serde_json::json!(1)),
            "more raw rows than its rows",
        ),
        (
            Box::new(|v| v["page"][1]["row_group_ids"][0]["id"] = serde_json::json!(3)),
            "fewer raw rows",
        ),
        (
            Box::new(|v| {
                v["page"][1]["row_group_ids"][0]["offset"] = serde_json::json!(1u64 << 50)
            }),
            "row group offsets",
        ),
        (
            Box::new(|v| v["header_size"] = serde_json::json!(10)),
            "header_size is smaller",
        ),
        (
            Box::new(|v| v["page_size"] = serde_json::json!(0)),
            "page_size is 0",
        ),
        (
            Box::new(|v| v["schema"] = serde_json::json!([])),
            "no schema",
        ),
        (
            Box::new(|v| v["schema"][0]["schema"]["label"]["type"] = "string".into()),
            "column \"label\": is string",
        ),
        (
            Box::new(|v| v["schema"][0]["schema"]["data"]["type"] = "int32".into()),
            "column \"data\": is int32",
        ),
        (
            Box::new(|v| v["schema"][0]["blob_fields"] = serde_json::json!([])),
            "not among blob_fields",
        ),
        (
            Box::new(|v| v["shard_addresses"] = serde_json::json!(["../x"])),
            "",
        ),
    ];
    for (edit, want) in cases {
        let (p, b) = with_header(edit);
        let r = read_header(&b).and_then(|h| group(&h, &p).map(|_| h));
        let msg = match r {
            Err(e) => e.to_string(),
            Ok(_) => fault(&p, &b),
        };
        assert!(msg.contains(want), "{msg} (wanted {want:?})");
    }
}

#[test]
fn lying_rows_are_typed_errors() {
    let (p, b) = fixture("records/small.mindrecord1");
    let h = read_header(&b).unwrap();
    let blob = h.header_size as usize;
    let raw = (h.header_size + h.page_size) as usize;
    // A blob length past its page, a raw length past its page, a raw row that is not a map,
    // a negative label.
    let mut bad = b.clone();
    bad[blob..blob + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(fault(&p, &bad).contains("row 0: blob of 1099511627776 bytes runs past its page"));
    let mut bad = b.clone();
    bad[raw..raw + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(fault(&p, &bad).contains("row 0: raw row of"));
    let mut bad = b.clone();
    bad[raw + 8] = 0x01;
    assert!(fault(&p, &bad).contains("row 0: raw columns damaged"));
    let label_at = raw + 8 + u64_le(&b[raw..raw + 8]) as usize - 1;
    let mut bad = b.clone();
    bad[label_at] = 0xFF; // negative fixint -1
    assert!(fault(&p, &bad).contains("row 0: label -1"));
    let opts = MindRecordOptions {
        label_column: "file_name".into(),
        ..MindRecordOptions::default()
    };
    let e = index(&b, &opts).unwrap_err().to_string();
    assert!(
        e.contains("column \"file_name\": is string, not an int32/int64 scalar"),
        "{e}"
    );
}
