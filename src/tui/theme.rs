//! Colours: true colour when the terminal says so (`COLORTERM`), the 256-colour palette
//! otherwise, and none at all with `NO_COLOR` or `[ui] color = "never"` in the defaults file
//! (then only bold, reverse and underline mark things).

use crate::app::defaults::ColorChoice;
use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Palette {
    None,
    Indexed,
    TrueColor,
}

impl Palette {
    /// For the resolved colour choice (`NO_COLOR` and the defaults file decided it: never is
    /// no colour; the TUI always draws on a terminal, so auto and always are the same), then
    /// `COLORTERM`.
    pub fn detect(color: ColorChoice, colorterm: Option<&str>) -> Palette {
        if color == ColorChoice::Never {
            return Palette::None;
        }
        match colorterm {
            Some("truecolor" | "24bit") => Palette::TrueColor,
            _ => Palette::Indexed,
        }
    }

    pub fn from_env(color: ColorChoice) -> Palette {
        Palette::detect(color, std::env::var("COLORTERM").ok().as_deref())
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub palette: Palette,
}

impl Theme {
    pub fn new(palette: Palette) -> Theme {
        Theme { palette }
    }

    fn fg(&self, rgb: (u8, u8, u8), index: u8) -> Style {
        match self.palette {
            Palette::None => Style::default(),
            Palette::Indexed => Style::default().fg(Color::Indexed(index)),
            Palette::TrueColor => Style::default().fg(Color::Rgb(rgb.0, rgb.1, rgb.2)),
        }
    }

    pub fn text(&self) -> Style {
        Style::default()
    }

    pub fn title(&self) -> Style {
        self.fg((120, 180, 255), 75).add_modifier(Modifier::BOLD)
    }

    pub fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    pub fn tab_active(&self) -> Style {
        self.fg((255, 255, 255), 15)
            .add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
    }

    pub fn ok(&self) -> Style {
        self.fg((110, 200, 120), 77)
    }

    pub fn warn(&self) -> Style {
        self.fg((230, 190, 80), 179).add_modifier(Modifier::BOLD)
    }

    pub fn error(&self) -> Style {
        self.fg((240, 90, 90), 203).add_modifier(Modifier::BOLD)
    }

    pub fn dim(&self) -> Style {
        match self.palette {
            Palette::None => Style::default(),
            _ => self.fg((140, 140, 140), 245),
        }
    }

    pub fn pending(&self) -> Style {
        self.fg((200, 140, 255), 141).add_modifier(Modifier::ITALIC)
    }

    /// Series colours for charts (one per GPU or per figure).
    pub fn series(&self, i: usize) -> Style {
        const RGB: [(u8, u8, u8); 8] = [
            (100, 180, 255),
            (240, 150, 60),
            (120, 210, 120),
            (230, 100, 160),
            (200, 200, 90),
            (150, 120, 240),
            (90, 210, 210),
            (220, 220, 220),
        ];
        const IDX: [u8; 8] = [75, 208, 114, 205, 185, 141, 80, 252];
        self.fg(RGB[i % 8], IDX[i % 8])
    }
}
