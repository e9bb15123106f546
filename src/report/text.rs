//! Text for bitmap charts. plotters' `ab_glyph` renderer places each glyph's outline at the
//! pen position without the glyph's left side bearing, so digits such as `1` drift left and
//! `116.0` reads like `11 6.0`. [`Crisp`] wraps a backend and draws text itself with the
//! embedded font, each glyph at its true position; everything else goes to the wrapped backend.
//! Anchoring and layout stay plotters' own (the same text box), so nothing moves but the glyphs.

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};
use std::sync::OnceLock;

fn font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(super::charts::FONT).ok())
        .as_ref()
}

/// A backend whose text is rasterised here (see the module docs).
pub struct Crisp<DB>(pub DB);

type Res<E> = Result<(), DrawingErrorKind<E>>;

impl<DB: DrawingBackend> DrawingBackend for Crisp<DB> {
    type ErrorType = DB::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }

    fn ensure_prepared(&mut self) -> Res<DB::ErrorType> {
        self.0.ensure_prepared()
    }

    fn present(&mut self) -> Res<DB::ErrorType> {
        self.0.present()
    }

    fn draw_pixel(&mut self, p: BackendCoord, color: BackendColor) -> Res<DB::ErrorType> {
        self.0.draw_pixel(p, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Res<DB::ErrorType> {
        self.0.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Res<DB::ErrorType> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Res<DB::ErrorType> {
        self.0.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Res<DB::ErrorType> {
        self.0.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Res<DB::ErrorType> {
        self.0.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Res<DB::ErrorType> {
        self.0.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<TStyle: BackendTextStyle>(
        &self,
        text: &str,
        style: &TStyle,
    ) -> Result<(u32, u32), DrawingErrorKind<DB::ErrorType>> {
        self.0.estimate_text_size(text, style)
    }

    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> Res<DB::ErrorType> {
        let color = style.color();
        let Some(font) = font() else {
            return self.0.draw_text(text, style, pos);
        };
        if color.alpha == 0.0 {
            return Ok(());
        }
        // The box plotters laid the text out with, anchored as plotters anchors it.
        let ((min_x, min_y), (max_x, max_y)) = style
            .layout_box(text)
            .map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let size = style.size() as f32;
        let scaled = font.as_scaled(PxScale::from(size));
        // The baseline sits where plotters' renderer puts it (half the size down the box).
        let baseline = size / 2.0;
        let mut pixels: Vec<(i32, i32, f32)> = Vec::new();
        let mut caret = 0f32;
        let mut prev = None;
        for c in text.chars() {
            let id = scaled.glyph_id(c);
            if let Some(p) = prev {
                caret += scaled.kern(p, id);
            }
            let glyph = id.with_scale_and_position(scaled.scale(), point(caret, baseline));
            if let Some(outline) = font.outline_glyph(glyph) {
                let b = outline.px_bounds();
                let (bx, by) = (b.min.x as i32, b.min.y as i32);
                outline.draw(|x, y, cov| {
                    if cov > 0.0 {
                        pixels.push((bx + x as i32, by + y as i32, cov));
                    }
                });
            }
            caret += scaled.h_advance(id);
            prev = Some(id);
        }
        let trans = style.transform();
        let (w, h) = self.0.get_size();
        for (x, y, cov) in pixels {
            let (x, y) = trans.transform(x + dx - min_x, y + dy - min_y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                self.0
                    .draw_pixel((x, y), color.mix(f64::from(cov.min(1.0))))?;
            }
        }
        Ok(())
    }
}
