//! The contact sheet: the tiles of a [`Preview`] on a grid, each fitted into a square of
//! the tile size (its decoded original to its left with `with_source`), captioned with its
//! class (or label weights) and its file.

use super::font::{self, LINE};
use super::{Picture, Preview, Tile};

const GAP: usize = 6;
const BACKGROUND: [u8; 3] = [245, 245, 245];
const INK: [u8; 3] = [20, 20, 20];
const GREY: [u8; 3] = [100, 100, 100];
/// Captions need room for a few words even under small tiles.
const MIN_CELL: usize = 72;

/// A cell's size: its pictures' squares side by side, and two caption lines.
fn cell(p: &Preview) -> (usize, usize) {
    let side = p.tile.max(1);
    let pictures = if p.tiles.iter().any(|t| t.source.is_some()) {
        2
    } else {
        1
    };
    let w = (pictures * side + (pictures - 1) * GAP).max(MIN_CELL);
    (w, side + 2 * LINE + 2)
}

/// Columns of the grid: about square.
pub fn columns(n: usize) -> usize {
    (1..=n.max(1)).find(|c| c * c >= n).unwrap_or(1)
}

/// `pic` fitted into a `side` square (a picture the size already is kept as it is).
fn fitted(pic: &Picture, side: usize) -> Picture {
    if pic.width.max(pic.height) == side {
        pic.clone()
    } else {
        pic.fit(side)
    }
}

/// Draw one tile's pictures and caption with the cell's top-left corner at `(x, y)`.
fn draw_tile(sheet: &mut Picture, t: &Tile, side: usize, cell_w: usize, x: usize, y: usize) {
    let mut px = x;
    for pic in t.source.iter().chain(std::iter::once(&t.picture)) {
        let f = fitted(pic, side);
        sheet.paste(
            &f,
            px + (side - f.width.min(side)) / 2,
            y + (side - f.height.min(side)) / 2,
        );
        px += side + GAP;
    }
    let ty = y + side + 2;
    font::draw(sheet, x, ty, &font::fit(&t.label, cell_w), INK);
    let file = t.file.rsplit('/').next().unwrap_or(&t.file);
    font::draw(sheet, x, ty + LINE, &font::fit(file, cell_w), GREY);
}

/// The contact sheet of `p`.
pub fn sheet(p: &Preview) -> Picture {
    let (cw, ch) = cell(p);
    let n = p.tiles.len();
    let cols = columns(n);
    let rows = n.div_ceil(cols).max(1);
    let mut s = Picture::filled(GAP + cols * (cw + GAP), GAP + rows * (ch + GAP), BACKGROUND);
    for (i, t) in p.tiles.iter().enumerate() {
        let (r, c) = (i / cols, i % cols);
        draw_tile(
            &mut s,
            t,
            p.tile.max(1),
            cw,
            GAP + c * (cw + GAP),
            GAP + r * (ch + GAP),
        );
    }
    s
}

/// One tile alone (its pictures and caption), as the page shows it.
pub fn tile(p: &Preview, t: &Tile) -> Picture {
    let (cw, ch) = cell(p);
    let mut s = Picture::filled(cw, ch, BACKGROUND);
    draw_tile(&mut s, t, p.tile.max(1), cw, 0, 0);
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_make_a_square_grid() {
        assert_eq!(super::columns(1), 1);
        assert_eq!(super::columns(4), 2);
        assert_eq!(super::columns(5), 3);
        assert_eq!(super::columns(16), 4);
    }
}
