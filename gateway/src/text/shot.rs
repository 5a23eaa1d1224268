//! `!!shot`: a picture of a pane, with its colours, as a PNG — for a phone, where a wide TUI
//! frame as text wraps into noise.
//!
//! The pane as `capture-pane -e` gives it (text with SGR colour and attribute sequences) is
//! read by a terminal emulator's parser (`vt100`), each cell is drawn with a glyph of the
//! vendored DejaVu Sans Mono (`ab_glyph`; it has the box-drawing and block characters every
//! TUI frame is made of, which bitmap-font crates lack) on its background colour, and the
//! whole is encoded as PNG (`png`). No browser, no system font. Characters the font lacks —
//! CJK, emoji — are drawn as the font's missing-glyph box (documented).

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};

/// DejaVu Sans Mono (Bitstream Vera licence, see `fonts/LICENSE`).
const FONT: &[u8] = include_bytes!("../../fonts/DejaVuSansMono.ttf");
/// The glyphs' size in pixels.
const PX: f32 = 16.0;
/// At most this many cells are drawn (a pane larger than that is cut): ~1.3 M pixels at most.
pub const MAX_COLS: u16 = 250;
pub const MAX_ROWS: u16 = 100;

/// A colour, red-green-blue.
pub type Rgb = [u8; 3];

/// The page: a dark terminal.
pub const BACKGROUND: Rgb = [0x1e, 0x1e, 0x1e];
pub const FOREGROUND: Rgb = [0xd4, 0xd4, 0xd4];

/// The 16 ANSI colours (xterm's).
const ANSI: [Rgb; 16] = [
    [0x00, 0x00, 0x00],
    [0xcd, 0x31, 0x31],
    [0x0d, 0xbc, 0x79],
    [0xe5, 0xe5, 0x10],
    [0x24, 0x72, 0xc8],
    [0xbc, 0x3f, 0xbc],
    [0x11, 0xa8, 0xcd],
    [0xe5, 0xe5, 0xe5],
    [0x66, 0x66, 0x66],
    [0xf1, 0x4c, 0x4c],
    [0x23, 0xd1, 0x8b],
    [0xf5, 0xf5, 0x43],
    [0x3b, 0x8e, 0xea],
    [0xd6, 0x70, 0xd6],
    [0x29, 0xb8, 0xdb],
    [0xff, 0xff, 0xff],
];

/// A 256-colour palette index as RGB (the 16 colours, the 6×6×6 cube, the grey ramp).
pub fn palette(i: u8) -> Rgb {
    match i {
        0..=15 => ANSI[i as usize],
        16..=231 => {
            let i = i - 16;
            let level = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
            [level(i / 36), level((i / 6) % 6), level(i % 6)]
        }
        _ => {
            let g = 8 + (i - 232) * 10;
            [g, g, g]
        }
    }
}

fn color(c: vt100::Color, default: Rgb) -> Rgb {
    match c {
        vt100::Color::Default => default,
        vt100::Color::Idx(i) => palette(i),
        vt100::Color::Rgb(r, g, b) => [r, g, b],
    }
}

/// The font and the cell it fills.
pub struct Renderer {
    font: FontRef<'static>,
    scale: PxScale,
    /// A cell, in pixels.
    pub cell_w: u32,
    pub cell_h: u32,
    ascent: f32,
}

impl Renderer {
    pub fn new() -> Renderer {
        // The font is part of the binary and known to parse (a unit test checks it).
        let font = FontRef::try_from_slice(FONT).unwrap_or_else(|_| unreachable!());
        let scale = PxScale::from(PX);
        let scaled = font.as_scaled(scale);
        let cell_w = scaled.h_advance(font.glyph_id('M')).ceil().max(1.0) as u32;
        let cell_h = (scaled.ascent() - scaled.descent() + scaled.line_gap())
            .ceil()
            .max(1.0) as u32;
        Renderer {
            scale,
            cell_w,
            cell_h,
            ascent: scaled.ascent(),
            font,
        }
    }

    /// Draws `text` (one cell's contents) into the cell at (`x0`, `y0`) of `img` (`width`
    /// pixels a row, RGB), over `bg`, in `fg`.
    #[allow(clippy::too_many_arguments)]
    fn cell(
        &self,
        img: &mut [u8],
        width: u32,
        x0: u32,
        y0: u32,
        cells: u32,
        text: &str,
        fg: Rgb,
        bg: Rgb,
        bold: bool,
    ) {
        let (w, h) = (self.cell_w * cells, self.cell_h);
        for y in y0..y0 + h {
            for x in x0..x0 + w {
                put(img, width, x, y, bg);
            }
        }
        let Some(ch) = text.chars().next().filter(|c| !c.is_whitespace()) else {
            return;
        };
        let glyph = self
            .font
            .glyph_id(ch)
            .with_scale_and_position(self.scale, point(x0 as f32, y0 as f32 + self.ascent));
        let Some(outlined) = self.font.outline_glyph(glyph) else {
            return;
        };
        let b = outlined.px_bounds();
        // Bold: the glyph drawn again one pixel to the right.
        let offsets: &[i64] = if bold { &[0, 1] } else { &[0] };
        for &dx in offsets {
            outlined.draw(|gx, gy, coverage| {
                let x = b.min.x as i64 + i64::from(gx) + dx;
                let y = b.min.y as i64 + i64::from(gy);
                // Kept inside the cell: a glyph never paints its neighbours.
                if x < i64::from(x0)
                    || y < i64::from(y0)
                    || x >= i64::from(x0 + w)
                    || y >= i64::from(y0 + h)
                {
                    return;
                }
                let (x, y) = (x as u32, y as u32);
                let c = coverage.clamp(0.0, 1.0);
                let old = get(img, width, x, y);
                let mix = |i: usize| (f32::from(fg[i]) * c + f32::from(old[i]) * (1.0 - c)) as u8;
                put(img, width, x, y, [mix(0), mix(1), mix(2)]);
            });
        }
    }

    /// One cell, alone, as RGB pixels: what [`Renderer::render`] draws for it (tests compare
    /// a picture's cells with these).
    pub fn raster(&self, text: &str, fg: Rgb, bg: Rgb) -> Vec<u8> {
        let mut img = vec![0u8; (self.cell_w * self.cell_h * 3) as usize];
        self.cell(&mut img, self.cell_w, 0, 0, 1, text, fg, bg, false);
        img
    }

    /// The pane's text with its escape sequences (as `capture-pane -e -p` prints it), drawn:
    /// (width, height, RGB pixels). The size is the text's own (at most
    /// [`MAX_COLS`]×[`MAX_ROWS`] cells).
    pub fn render(&self, screen: &str) -> (u32, u32, Vec<u8>) {
        let lines: Vec<&str> = screen.lines().collect();
        let rows = (lines.len().max(1) as u16).min(MAX_ROWS);
        // Read once at the widest size; the picture is as wide as the widest line drawn.
        let mut parser = vt100::Parser::new(rows, MAX_COLS, 0);
        // Each line from column 0, attributes reset: a line of capture-pane starts afresh.
        for (i, l) in lines.iter().take(usize::from(rows)).enumerate() {
            parser.process(format!("\x1b[{};1H\x1b[0m", i + 1).as_bytes());
            parser.process(l.as_bytes());
        }
        let s = parser.screen();
        let drawn = |c: u16| {
            (0..rows).any(|r| {
                s.cell(r, c).is_some_and(|cell| {
                    !cell.contents().is_empty() || cell.bgcolor() != vt100::Color::Default
                })
            })
        };
        let cols = (0..MAX_COLS).rev().find(|&c| drawn(c)).map_or(1, |c| c + 1);
        let (width, height) = (u32::from(cols) * self.cell_w, u32::from(rows) * self.cell_h);
        let mut img = vec![0u8; (width * height * 3) as usize];
        for r in 0..rows {
            for c in 0..cols {
                let Some(cell) = s.cell(r, c) else { continue };
                if cell.is_wide_continuation() {
                    continue;
                }
                let (mut fg, mut bg) = (
                    color(cell.fgcolor(), FOREGROUND),
                    color(cell.bgcolor(), BACKGROUND),
                );
                if cell.inverse() {
                    std::mem::swap(&mut fg, &mut bg);
                }
                let cells = if cell.is_wide() && c + 1 < cols { 2 } else { 1 };
                self.cell(
                    &mut img,
                    width,
                    u32::from(c) * self.cell_w,
                    u32::from(r) * self.cell_h,
                    cells,
                    cell.contents(),
                    fg,
                    bg,
                    cell.bold(),
                );
            }
        }
        (width, height, img)
    }
}

impl Default for Renderer {
    fn default() -> Self {
        Renderer::new()
    }
}

fn put(img: &mut [u8], width: u32, x: u32, y: u32, c: Rgb) {
    let i = ((y * width + x) * 3) as usize;
    if let Some(p) = img.get_mut(i..i + 3) {
        p.copy_from_slice(&c);
    }
}

fn get(img: &[u8], width: u32, x: u32, y: u32) -> Rgb {
    let i = ((y * width + x) * 3) as usize;
    match img.get(i..i + 3) {
        Some(p) => [p[0], p[1], p[2]],
        None => BACKGROUND,
    }
}

/// RGB pixels as a PNG file.
pub fn png(width: u32, height: u32, rgb: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, width, height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header()?;
        w.write_image_data(rgb)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_font_parses_and_has_the_characters_of_tui_frames() {
        assert!(FontRef::try_from_slice(FONT).is_ok());
        let r = Renderer::new();
        assert!(r.cell_w >= 7 && r.cell_h >= 14, "{}x{}", r.cell_w, r.cell_h);
        for ch in ['A', '╭', '─', '│', '█', '▌', '✓'] {
            assert_ne!(r.font.glyph_id(ch).0, 0, "{ch} is in the font");
        }
    }

    #[test]
    fn each_cell_is_drawn_as_its_own_raster_with_its_colours() {
        let r = Renderer::new();
        let (w, h, img) = r.render("ab\n\x1b[31mX\x1b[0m\x1b[44m \x1b[0m");
        assert_eq!((w, h), (2 * r.cell_w, 2 * r.cell_h));
        let cell = |row: u32, col: u32| -> Vec<u8> {
            let mut v = Vec::new();
            for y in row * r.cell_h..(row + 1) * r.cell_h {
                let i = ((y * w + col * r.cell_w) * 3) as usize;
                v.extend_from_slice(&img[i..i + (r.cell_w * 3) as usize]);
            }
            v
        };
        assert_eq!(cell(0, 0), r.raster("a", FOREGROUND, BACKGROUND));
        assert_eq!(cell(0, 1), r.raster("b", FOREGROUND, BACKGROUND));
        assert_eq!(cell(1, 0), r.raster("X", palette(1), BACKGROUND));
        assert_eq!(cell(1, 1), r.raster(" ", FOREGROUND, palette(4)));
        assert_ne!(cell(0, 0), cell(0, 1));
        let png = png(w, h, &img).expect("png");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }

    #[test]
    fn the_palette_is_xterms() {
        assert_eq!(palette(1), [0xcd, 0x31, 0x31]);
        assert_eq!(palette(16), [0, 0, 0]);
        assert_eq!(palette(231), [255, 255, 255]);
        assert_eq!(palette(232), [8, 8, 8]);
        assert_eq!(palette(255), [238, 238, 238]);
    }
}
