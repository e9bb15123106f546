//! A box whose text may be taller than the screen (the diff before saving, the key help, an
//! error, the message log): its lines wrapped to its width, the rows from its scroll offset
//! shown, where it is and the keys that move it on its bottom border, and pinned lines (a
//! question's answers) always below them, so nothing in it is ever out of reach.

use super::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

/// What a scrolling box shows.
pub struct ScrollBox {
    pub title: String,
    /// The text, each line in one style; wrapped to the box's width.
    pub lines: Vec<(String, Style)>,
    /// Shown below the text whatever the scroll (wrapped too).
    pub pinned: Vec<(String, Style)>,
    /// The box's most columns and rows, borders included; it is as tall as its text needs.
    pub width: u16,
    pub height: u16,
}

/// Rows of `text` in `w` columns: broken after the last space that fits (the space dropped),
/// a word longer than a row broken where the row ends; nothing is lost.
pub fn wrap(text: &str, w: usize) -> Vec<String> {
    let w = w.max(1);
    let mut rows = Vec::new();
    let mut rest: Vec<char> = text.chars().collect();
    while rest.len() > w {
        match rest[..=w]
            .iter()
            .rposition(|c| *c == ' ')
            .filter(|&i| i > 0)
        {
            Some(i) => {
                rows.push(rest[..i].iter().collect());
                rest.drain(..=i);
            }
            None => {
                rows.push(rest[..w].iter().collect());
                rest.drain(..w);
            }
        }
    }
    rows.push(rest.into_iter().collect());
    rows
}

fn rows(lines: &[(String, Style)], w: usize) -> Vec<(String, Style)> {
    lines
        .iter()
        .flat_map(|(text, style)| wrap(text, w).into_iter().map(move |r| (r, *style)))
        .collect()
}

/// Draws `b` centred in `full`, from row `scroll` (brought within the rows there are: the
/// offset is kept as drawn). Returns the rows of text shown at once (a page).
pub fn draw(f: &mut Frame, full: Rect, b: &ScrollBox, scroll: &mut usize, theme: &Theme) -> usize {
    let width = b.width.min(full.width).max(3);
    let inner_w = usize::from(width - 2);
    let text = rows(&b.lines, inner_w);
    let pinned = rows(&b.pinned, inner_w);
    let most = usize::from(b.height.min(full.height).max(3)) - 2;
    let window = text.len().min(most.saturating_sub(pinned.len()).max(1));
    let height = (window + pinned.len()).min(most) as u16 + 2;
    *scroll = (*scroll).min(text.len() - window);
    let area = Rect {
        x: full.x + (full.width - width) / 2,
        y: full.y + (full.height - height) / 2,
        width,
        height,
    };
    let mut block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(format!(" {} ", b.title), theme.title()));
    if text.len() > window {
        block = block.title_bottom(Span::styled(
            format!(
                " {}–{} of {} · ↑↓ PgUp PgDn Home End ",
                *scroll + 1,
                *scroll + window,
                text.len()
            ),
            theme.dim(),
        ));
    }
    let shown: Vec<Line> = text
        .into_iter()
        .skip(*scroll)
        .take(window)
        .chain(pinned)
        .map(|(r, style)| Line::styled(r, style))
        .collect();
    f.render_widget(Clear, area);
    f.render_widget(Paragraph::new(shown).block(block), area);
    window
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_character() {
        assert_eq!(wrap("short", 10), ["short"]);
        assert_eq!(
            wrap("a long line of words", 8),
            ["a long", "line of", "words"]
        );
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        // A diff line keeps its leading mark and indentation.
        assert_eq!(wrap("+  key: value here", 10), ["+  key:", "value here"]);
        let text =
            "the trial could not run: /a/very/long/path/grok1-BF16-pretrain.yaml: 1 lint error";
        let joined: String = wrap(text, 20).concat();
        assert_eq!(joined.replace(' ', ""), text.replace(' ', ""));
    }

    #[test]
    fn a_tall_box_shows_a_window_and_keeps_its_pinned_lines() {
        let theme = Theme::new(crate::tui::theme::Palette::None);
        let b = ScrollBox {
            title: "T".into(),
            lines: (1..=30)
                .map(|i| (format!("line {i}"), Style::default()))
                .collect(),
            pinned: vec![("y writes · n cancels".into(), Style::default())],
            width: 40,
            height: 12,
        };
        let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(40, 12)).unwrap();
        let mut scroll = usize::MAX;
        let mut page = 0;
        term.draw(|f| page = draw(f, f.area(), &b, &mut scroll, &theme))
            .unwrap();
        assert_eq!((page, scroll), (9, 21));
        let shown: String = term
            .backend()
            .buffer()
            .content
            .iter()
            .map(|c| c.symbol())
            .collect();
        assert!(
            shown.contains("line 30") && !shown.contains("line 21 "),
            "{shown}"
        );
        assert!(shown.contains("y writes · n cancels"), "{shown}");
        assert!(shown.contains("22–30 of 30"), "{shown}");
    }
}
