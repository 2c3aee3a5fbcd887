//! `imgfeed merge-npy OUT SLICE...`: the folders of a split npy conversion (`convert --format
//! npy --slice I/K`, one per slice, in slice order) joined into the folder one conversion
//! would have written, byte for byte: the rows of `images.npy` and `labels.npy` one slice
//! after the other under one header, `samples.txt` concatenated, `classes.json` the slices'
//! (which must agree). What `merge-index` is to shards.
//!
//! The files are written under temporary names and renamed into place with `images.npy`
//! last, as a conversion does: an `OUT/images.npy` is a complete merge.

use super::npy::{NpyWriter, PARTIAL};
use crate::error::{Error, Invalid, Result};
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// What [`merge_npy`] joined.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NpyMerge {
    /// Samples (rows of `images.npy`) in the merged folder.
    pub samples: usize,
    /// Slices joined.
    pub slices: usize,
}

/// A `.npy` file's array: its numpy type and its shape (rows first), and where its data
/// starts.
#[derive(Debug, PartialEq, Eq)]
struct Array {
    descr: &'static str,
    rows: usize,
    tail: Vec<usize>,
    data_at: u64,
}

/// The numpy types an npy conversion writes (the writer takes them as `&'static str`).
const DESCRS: [&str; 6] = ["|u1", "<f4", "<f2", "<u4", "<i4", "<i8"];

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Read the header of a `.npy` file written by a conversion (format 1.0, C order).
fn read_header(path: &Path) -> Result<Array> {
    let not_npy = || Invalid::NotNpy {
        path: path.to_path_buf(),
    };
    let mut f = File::open(path).map_err(io(path))?;
    let mut lead = [0u8; 10];
    f.read_exact(&mut lead).map_err(|_| not_npy())?;
    if &lead[..8] != b"\x93NUMPY\x01\x00" {
        return Err(not_npy().into());
    }
    let len = usize::from(u16::from_le_bytes([lead[8], lead[9]]));
    let mut dict = vec![0u8; len];
    f.read_exact(&mut dict).map_err(|_| not_npy())?;
    let dict = std::str::from_utf8(&dict).map_err(|_| not_npy())?;
    let field = |key: &str| -> Option<&str> {
        let at = dict.find(&format!("'{key}': "))? + key.len() + 4;
        Some(&dict[at..])
    };
    let descr = field("descr")
        .and_then(|v| v.strip_prefix('\''))
        .and_then(|v| v.split('\'').next())
        .and_then(|d| DESCRS.iter().copied().find(|known| *known == d))
        .ok_or_else(not_npy)?;
    if !field("fortran_order").is_some_and(|v| v.starts_with("False")) {
        return Err(not_npy().into());
    }
    let dims: Vec<usize> = field("shape")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split(')').next())
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::parse)
                .collect::<std::result::Result<Vec<usize>, _>>()
        })
        .and_then(|parsed| parsed.ok())
        .ok_or_else(not_npy)?;
    let (&rows, tail) = dims.split_first().ok_or_else(not_npy)?;
    Ok(Array {
        descr,
        rows,
        tail: tail.to_vec(),
        data_at: 10 + len as u64,
    })
}

/// Join `parts` (the slice folders, in slice order) into `out`; see the module's docs. A
/// slice whose arrays differ from the first's in type or sample shape, or whose classes
/// differ, is refused by name.
pub fn merge_npy(parts: &[PathBuf], out: &Path) -> Result<NpyMerge> {
    let Some(first) = parts.first() else {
        return Err(Invalid::NoSlices.into());
    };
    let classes = |p: &Path| std::fs::read(p.join("classes.json")).ok();
    let first_classes = classes(first);
    for p in parts {
        if classes(p) != first_classes {
            return Err(Invalid::SlicesDiffer {
                slice: p.clone(),
                what: "classes.json",
            }
            .into());
        }
    }
    super::create_out_dir(out)?;
    let partial = |name: &str| out.join(format!("{name}{PARTIAL}"));
    let written = (|| -> Result<usize> {
        let names_path = partial("samples.txt");
        let mut names = File::create(&names_path).map_err(io(&names_path))?;
        for p in parts {
            let from = p.join("samples.txt");
            let mut f = File::open(&from).map_err(io(&from))?;
            std::io::copy(&mut f, &mut names).map_err(io(&names_path))?;
        }
        names.flush().map_err(io(&names_path))?;
        if let Some(c) = &first_classes {
            let path = partial("classes.json");
            std::fs::write(&path, c).map_err(io(&path))?;
        }
        join_arrays(parts, "labels.npy", &partial("labels.npy"))?;
        join_arrays(parts, "images.npy", &partial("images.npy"))
    })();
    let mut names = vec!["samples.txt", "labels.npy", "images.npy"];
    if first_classes.is_some() {
        names.insert(0, "classes.json");
    }
    match written {
        Ok(samples) => {
            for name in names {
                let from = partial(name);
                std::fs::rename(&from, out.join(name)).map_err(io(&from))?;
            }
            Ok(NpyMerge {
                samples,
                slices: parts.len(),
            })
        }
        Err(e) => {
            for name in names {
                let _ = std::fs::remove_file(partial(name));
            }
            Err(e)
        }
    }
}

/// The arrays `name` of `parts`, their rows one after the other, written to `to`; returns
/// the rows.
fn join_arrays(parts: &[PathBuf], name: &str, to: &Path) -> Result<usize> {
    let arrays = parts
        .iter()
        .map(|p| read_header(&p.join(name)))
        .collect::<Result<Vec<Array>>>()?;
    let Some(first) = arrays.first() else {
        return Err(Invalid::NoSlices.into());
    };
    for (p, a) in parts.iter().zip(&arrays) {
        if a.descr != first.descr || a.tail != first.tail {
            return Err(Invalid::SlicesDiffer {
                slice: p.clone(),
                what: if name == "images.npy" {
                    "images.npy's type or sample shape"
                } else {
                    "labels.npy's type or shape"
                },
            }
            .into());
        }
    }
    let mut w = NpyWriter::create(to, first.descr, &first.tail)?;
    let mut buf = vec![0u8; 1 << 20];
    for (p, a) in parts.iter().zip(&arrays) {
        let path = p.join(name);
        let mut f = File::open(&path).map_err(io(&path))?;
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(a.data_at)).map_err(io(&path))?;
        let mut f = BufReader::new(f);
        // The rows only: `rows` of the header, each of the tail's elements.
        let elem = match a.descr {
            "|u1" => 1,
            "<f2" => 2,
            "<f4" | "<u4" | "<i4" => 4,
            _ => 8,
        };
        let mut left = a.rows * a.tail.iter().product::<usize>() * elem;
        let mut rows = a.rows;
        while left > 0 {
            let n = left.min(buf.len());
            f.read_exact(&mut buf[..n]).map_err(io(&path))?;
            // rows are counted once, with the first chunk
            w.append(&buf[..n], std::mem::take(&mut rows))?;
            left -= n;
        }
        w.append(&[], rows)?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(dir: &Path, rows: &[[u8; 2]], names: &[&str], classes: &str) {
        std::fs::create_dir_all(dir).expect("mkdir");
        let mut images = NpyWriter::create(&dir.join("images.npy"), "|u1", &[2]).expect("npy");
        for r in rows {
            images.append(r, 1).expect("append");
        }
        images.finish().expect("finish");
        let mut labels = NpyWriter::create(&dir.join("labels.npy"), "<i4", &[]).expect("npy");
        for (i, _) in rows.iter().enumerate() {
            labels.append(&(i as i32).to_le_bytes(), 1).expect("append");
        }
        labels.finish().expect("finish");
        let text: String = names.iter().map(|n| format!("{n}\n")).collect();
        std::fs::write(dir.join("samples.txt"), text).expect("write");
        std::fs::write(dir.join("classes.json"), classes).expect("write");
    }

    #[test]
    fn slices_join_into_what_one_conversion_writes() {
        let d = tempfile::tempdir().expect("tempdir");
        let (a, b, empty) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
        slice(&a, &[[1, 2], [3, 4]], &["x", "y"], "{}");
        slice(&empty, &[], &[], "{}");
        slice(&b, &[[5, 6]], &["z"], "{}");
        let whole = d.path().join("whole");
        slice(&whole, &[[1, 2], [3, 4], [5, 6]], &["x", "y", "z"], "{}");
        let out = d.path().join("out");
        let m = merge_npy(&[a.clone(), empty, b.clone()], &out).expect("merges");
        assert_eq!((m.samples, m.slices), (3, 3));
        for name in ["images.npy", "samples.txt", "classes.json"] {
            let got = std::fs::read(out.join(name)).expect("read");
            assert_eq!(
                got,
                std::fs::read(whole.join(name)).expect("read"),
                "{name}"
            );
        }
        // labels: each slice's own, one after the other
        let labels = std::fs::read(out.join("labels.npy")).expect("read");
        assert_eq!(read_header(&out.join("labels.npy")).expect("npy").rows, 3);
        assert_eq!(&labels[128..], [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        assert!(!out.join(format!("images.npy{PARTIAL}")).exists());

        // slices that disagree are refused by name, and nothing looks finished
        let other = d.path().join("other");
        slice(&other, &[[1, 2]], &["w"], "{\"cat\": 0}");
        let out2 = d.path().join("out2");
        let e = merge_npy(&[a.clone(), other.clone()], &out2).expect_err("classes differ");
        assert!(e.to_string().contains("classes.json"), "{e}");
        std::fs::write(other.join("classes.json"), "{}").expect("write");
        let mut wide = NpyWriter::create(&other.join("images.npy"), "|u1", &[3]).expect("npy");
        wide.append(&[1, 2, 3], 1).expect("append");
        wide.finish().expect("finish");
        let e = merge_npy(&[a, other], &out2).expect_err("shapes differ");
        assert!(e.to_string().contains("sample shape"), "{e}");
        assert!(e.is_usage());
        assert!(!out2.join("images.npy").exists() && !out2.join("labels.npy").exists());
        let junk = d.path().join("junk");
        std::fs::create_dir_all(&junk).expect("mkdir");
        std::fs::write(junk.join("images.npy"), b"not an array").expect("write");
        assert!(matches!(
            read_header(&junk.join("images.npy")),
            Err(Error::Invalid(Invalid::NotNpy { .. }))
        ));
    }
}
