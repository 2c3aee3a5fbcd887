//! A writer of the SQLite database file format (<https://www.sqlite.org/fileformat2.html>),
//! just what MindRecord's `.db` index needs: tables of integer and text columns written
//! once, rows in rowid order, as rowid B-trees built bottom-up in 4096-byte pages. No
//! indexes, no free pages, no overflow pages (a row must fit in a page: MindRecord's rows
//! are a few dozen bytes). SQLite itself reads the result (`PRAGMA integrity_check` in the
//! tests), as does MindSpore.

/// The page size of the files written.
const PAGE: usize = 4096;
/// The most payload a table leaf cell holds without an overflow page (`U - 35`).
const MAX_LOCAL: usize = PAGE - 35;

/// One column value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cell {
    /// An integer.
    Int(i64),
    /// UTF-8 text.
    Text(String),
}

/// A table to write: its `CREATE TABLE` statement and its rows (rowids 1, 2, …).
#[derive(Clone, Debug)]
pub struct Table {
    /// The table's name.
    pub name: String,
    /// `CREATE TABLE name(...)`, as SQLite keeps it in its schema.
    pub sql: String,
    /// The rows, each the table's columns in order.
    pub rows: Vec<Vec<Cell>>,
}

/// A row that does not fit in a page.
#[derive(Debug, thiserror::Error)]
#[error("a row of table {table} takes {bytes} bytes, more than a SQLite page holds")]
pub struct RowTooLarge {
    /// The table.
    pub table: String,
    /// The row's encoded size.
    pub bytes: usize,
}

/// SQLite's variable-length integer (big-endian groups of 7 bits, the 9th byte whole).
fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v >> 56 != 0 {
        let mut b = [0u8; 9];
        b[8] = v as u8;
        let mut x = v >> 8;
        for i in (0..8).rev() {
            b[i] = (x & 0x7F) as u8 | 0x80;
            x >>= 7;
        }
        out.extend_from_slice(&b);
        return;
    }
    let mut groups = [0u8; 8];
    let mut n = 0;
    let mut x = v;
    loop {
        groups[n] = (x & 0x7F) as u8;
        n += 1;
        x >>= 7;
        if x == 0 {
            break;
        }
    }
    for i in (0..n).rev() {
        out.push(groups[i] | if i > 0 { 0x80 } else { 0 });
    }
}

/// A row in SQLite's record format.
fn record(row: &[Cell]) -> Vec<u8> {
    let mut types = Vec::new();
    let mut body = Vec::new();
    for c in row {
        match c {
            Cell::Int(0) => put_varint(&mut types, 8),
            Cell::Int(1) => put_varint(&mut types, 9),
            Cell::Int(v) => {
                let (t, n) = match *v {
                    -0x80..=0x7F => (1, 1),
                    -0x8000..=0x7FFF => (2, 2),
                    -0x80_0000..=0x7F_FFFF => (3, 3),
                    -0x8000_0000..=0x7FFF_FFFF => (4, 4),
                    -0x8000_0000_0000..=0x7FFF_FFFF_FFFF => (5, 6),
                    _ => (6, 8),
                };
                put_varint(&mut types, t);
                body.extend_from_slice(&v.to_be_bytes()[8 - n..]);
            }
            Cell::Text(s) => {
                put_varint(&mut types, s.len() as u64 * 2 + 13);
                body.extend_from_slice(s.as_bytes());
            }
        }
    }
    // The header's size counts itself (one byte while the header is under 128 bytes).
    let mut out = Vec::with_capacity(types.len() + body.len() + 2);
    let mut size = types.len() + 1;
    if size >= 128 {
        size += 1;
    }
    put_varint(&mut out, size as u64);
    out.extend_from_slice(&types);
    out.extend_from_slice(&body);
    out
}

/// A B-tree page of `cells` (each already encoded), of `kind` (0x0D leaf, 0x05 interior),
/// starting at `start` in the page (100 on page 1).
fn page(kind: u8, cells: &[Vec<u8>], right: Option<u32>, start: usize) -> Vec<u8> {
    let mut p = vec![0u8; PAGE];
    let header = if right.is_some() { 12 } else { 8 };
    let mut content = PAGE;
    let mut ptr = start + header;
    for c in cells {
        content -= c.len();
        p[content..content + c.len()].copy_from_slice(c);
        p[ptr..ptr + 2].copy_from_slice(&(content as u16).to_be_bytes());
        ptr += 2;
    }
    p[start] = kind;
    p[start + 3..start + 5].copy_from_slice(&(cells.len() as u16).to_be_bytes());
    // 65536 is written as 0.
    p[start + 5..start + 7].copy_from_slice(&((content % 65536) as u16).to_be_bytes());
    if let Some(r) = right {
        p[start + 8..start + 12].copy_from_slice(&r.to_be_bytes());
    }
    p
}

/// Room a cell takes in a page: its bytes and its pointer.
fn room(cell: &[u8]) -> usize {
    cell.len() + 2
}

/// Writes one table's rows as a B-tree into `pages` (page `i` is number `i + 1`); returns
/// the root's page number.
fn btree(pages: &mut Vec<Vec<u8>>, table: &Table) -> Result<u32, RowTooLarge> {
    // Leaves: (page number, largest rowid).
    let mut level: Vec<(u32, u64)> = Vec::new();
    let mut cells: Vec<Vec<u8>> = Vec::new();
    let mut used = 8;
    let flush = |cells: &mut Vec<Vec<u8>>,
                 last: u64,
                 pages: &mut Vec<Vec<u8>>,
                 level: &mut Vec<(u32, u64)>| {
        pages.push(page(0x0D, cells, None, 0));
        level.push((pages.len() as u32, last));
        cells.clear();
    };
    for (i, row) in table.rows.iter().enumerate() {
        let rowid = i as u64 + 1;
        let payload = record(row);
        if payload.len() > MAX_LOCAL {
            return Err(RowTooLarge {
                table: table.name.clone(),
                bytes: payload.len(),
            });
        }
        let mut cell = Vec::with_capacity(payload.len() + 12);
        put_varint(&mut cell, payload.len() as u64);
        put_varint(&mut cell, rowid);
        cell.extend_from_slice(&payload);
        if used + room(&cell) > PAGE {
            flush(&mut cells, rowid - 1, pages, &mut level);
            used = 8;
        }
        used += room(&cell);
        cells.push(cell);
    }
    if !cells.is_empty() || level.is_empty() {
        flush(&mut cells, table.rows.len() as u64, pages, &mut level);
    }
    // Interior levels until one page is left.
    while level.len() > 1 {
        let mut next = Vec::new();
        let mut group: Vec<(u32, u64)> = Vec::new();
        let mut used = 12;
        for &(child, key) in &level {
            let mut cell = child.to_be_bytes().to_vec();
            put_varint(&mut cell, key);
            if used + room(&cell) > PAGE && group.len() > 1 {
                next.push(interior(pages, &group));
                group.clear();
                used = 12;
            }
            used += room(&cell);
            group.push((child, key));
        }
        next.push(interior(pages, &group));
        level = next;
    }
    Ok(level[0].0)
}

/// An interior page over `children` (the last is the right-most pointer).
fn interior(pages: &mut Vec<Vec<u8>>, children: &[(u32, u64)]) -> (u32, u64) {
    let (last, last_key) = children[children.len() - 1];
    let cells: Vec<Vec<u8>> = children[..children.len() - 1]
        .iter()
        .map(|&(c, k)| {
            let mut cell = c.to_be_bytes().to_vec();
            put_varint(&mut cell, k);
            cell
        })
        .collect();
    pages.push(page(0x05, &cells, Some(last), 0));
    (pages.len() as u32, last_key)
}

/// The bytes of a SQLite database holding `tables`.
pub fn database(tables: &[Table]) -> Result<Vec<u8>, RowTooLarge> {
    // Page 1 is the schema; the tables' pages follow.
    let mut pages: Vec<Vec<u8>> = vec![Vec::new()];
    let mut schema = Vec::new();
    for t in tables {
        let root = btree(&mut pages, t)?;
        schema.push(vec![
            Cell::Text("table".into()),
            Cell::Text(t.name.clone()),
            Cell::Text(t.name.clone()),
            Cell::Int(i64::from(root)),
            Cell::Text(t.sql.clone()),
        ]);
    }
    let cells: Vec<Vec<u8>> = schema
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let payload = record(row);
            let mut cell = Vec::new();
            put_varint(&mut cell, payload.len() as u64);
            put_varint(&mut cell, i as u64 + 1);
            cell.extend_from_slice(&payload);
            cell
        })
        .collect();
    if cells.iter().map(|c| room(c)).sum::<usize>() + 108 > PAGE {
        return Err(RowTooLarge {
            table: "sqlite_schema".into(),
            bytes: cells.iter().map(Vec::len).sum(),
        });
    }
    let mut first = page(0x0D, &cells, None, 100);
    let n = pages.len() as u32;
    let h = &mut first[..100];
    h[..16].copy_from_slice(b"SQLite format 3\0");
    h[16..18].copy_from_slice(&(PAGE as u16).to_be_bytes());
    h[18] = 1; // legacy write/read versions
    h[19] = 1;
    h[21] = 64; // payload fractions, fixed by the format
    h[22] = 32;
    h[23] = 32;
    h[24..28].copy_from_slice(&1u32.to_be_bytes()); // change counter
    h[28..32].copy_from_slice(&n.to_be_bytes()); // pages in the file
    h[40..44].copy_from_slice(&1u32.to_be_bytes()); // schema cookie
    h[44..48].copy_from_slice(&4u32.to_be_bytes()); // schema format
    h[56..60].copy_from_slice(&1u32.to_be_bytes()); // UTF-8
    h[92..96].copy_from_slice(&1u32.to_be_bytes()); // version-valid-for = change counter
    h[96..100].copy_from_slice(&3_040_001u32.to_be_bytes());
    pages[0] = first;
    Ok(pages.concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_records() {
        let enc = |v| {
            let mut o = Vec::new();
            put_varint(&mut o, v);
            o
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(127), [0x7F]);
        assert_eq!(enc(128), [0x81, 0x00]);
        assert_eq!(enc(u64::MAX).len(), 9);
        // (1, 'ab', 300): header size 4, types 9, 17, 2
        assert_eq!(
            record(&[Cell::Int(1), Cell::Text("ab".into()), Cell::Int(300)]),
            [4, 9, 17, 2, b'a', b'b', 1, 44]
        );
    }

    /// The file is checked by the sqlite3 program where there is one (it is no dependency:
    /// tests/mindrecord.rs has MindSpore read the files it indexes).
    #[test]
    fn sqlite_reads_what_is_written() {
        let rows: Vec<Vec<Cell>> = (0..5000i64)
            .map(|i| {
                vec![
                    Cell::Int(i),
                    Cell::Int(i * 1000),
                    Cell::Text(format!("n{i}")),
                ]
            })
            .collect();
        let db = database(&[
            Table {
                name: "T".into(),
                sql: "CREATE TABLE T(A INT NOT NULL, B INT NOT NULL, C TEXT)".into(),
                rows,
            },
            Table {
                name: "NAMES".into(),
                sql: "CREATE TABLE NAMES(NAME TEXT NOT NULL)".into(),
                rows: vec![vec![Cell::Text("x.mindrecord0".into())]],
            },
        ])
        .unwrap();
        assert_eq!(db.len() % PAGE, 0);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.db");
        std::fs::write(&p, &db).unwrap();
        let q = |sql: &str| {
            std::process::Command::new("sqlite3")
                .arg(&p)
                .arg(sql)
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let Some(ok) = q("PRAGMA integrity_check") else {
            eprintln!("SKIPPED sqlite_reads_what_is_written: no sqlite3 program");
            return;
        };
        assert_eq!(ok, "ok");
        assert_eq!(
            q("SELECT COUNT(*), SUM(A), MAX(B) FROM T").unwrap(),
            "5000|12497500|4999000"
        );
        assert_eq!(q("SELECT C FROM T WHERE A = 4321").unwrap(), "n4321");
        assert_eq!(q("SELECT NAME FROM NAMES").unwrap(), "x.mindrecord0");
    }
}
