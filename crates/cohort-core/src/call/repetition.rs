//! Whether a model's answer has fallen into a loop: the same passage written again and again to
//! the end of the text. Small models do this (Qwen2.5 0.5B/1.5B wrote one line of a poem until
//! `max_tokens`, two to three minutes a step on a CPU); a streamed answer is stopped as soon as
//! the loop shows, and the step is asked again saying why.

/// The shortest and longest passage a loop is looked for with, in bytes.
const SHORTEST: usize = 8;
const LONGEST: usize = 400;
/// A passage with fewer different letters than this is not looked at as a loop.
const LETTERS: usize = 4;

/// What makes a loop: the same passage at least `times` times in a row at the text's end,
/// over at least `span` bytes (a few short repeats, such as a Markdown rule, are text); the
/// repair policy's `loop_times` and `loop_span`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopLimits {
    /// How many times in a row the passage must be written (`loop_times`).
    pub times: usize,
    /// How many bytes the repeats must cover together, at least (`loop_span`).
    pub span: usize,
}

/// Where the loop at the end of `text` begins its second round, if `text` ends in one: what
/// comes before is the answer with the passage once. A passage of words repeated as `limits`
/// say is a loop; one with fewer than `LETTERS` different letters is not (a rule of dashes, a
/// row of zeros, padding: text that may rightly repeat).
pub fn loop_start(text: &str, limits: LoopLimits) -> Option<usize> {
    let LoopLimits { times, span } = limits;
    let b = text.as_bytes();
    for period in SHORTEST..=LONGEST.min(b.len() / times.max(1)) {
        let need = (period * times).max(span);
        if need > b.len() {
            break;
        }
        // The tail repeats with this period over `need` bytes?
        let tail = b.len() - need;
        if !(tail..b.len() - period).all(|i| b[i] == b[i + period]) {
            continue;
        }
        let passage = &text[text.floor_char_boundary(b.len() - period)..];
        let mut letters: Vec<char> = passage.chars().filter(|c| c.is_alphabetic()).collect();
        letters.sort_unstable();
        letters.dedup();
        if letters.len() < LETTERS {
            continue;
        }
        // How far back the repetition goes: the loop's first round starts there.
        let mut from = tail;
        while from > 0 && b[from - 1] == b[from - 1 + period] {
            from -= 1;
        }
        let mut cut = from + period;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        return Some(cut);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: LoopLimits = LoopLimits {
        times: 4,
        span: 240,
    };

    #[test]
    fn a_line_written_again_and_again_is_a_loop_cut_after_its_first_round() {
        let line = "Autumn rain whispers on the roof,\n";
        let text = format!("<think>{}</think>\n{}", "Haiku:\n", line.repeat(12));
        let cut = loop_start(&text, L).expect("a loop");
        // The round found starts at the newline before the first repeat.
        assert_eq!(
            &text[..cut],
            format!("<think>Haiku:\n</think>\n{}", line.trim_end())
        );
    }

    #[test]
    fn a_loop_that_breaks_off_mid_passage_is_found() {
        let text = format!(
            "intro {}Autumn r",
            "Autumn rain, cold and grey. ".repeat(10)
        );
        let cut = loop_start(&text, L).expect("a loop");
        assert!(text[..cut].ends_with("cold and grey."), "{}", &text[..cut]);
        assert_eq!(text[..cut].matches("Autumn rain").count(), 1);
    }

    #[test]
    fn ordinary_answers_and_short_repeats_are_not_loops() {
        let haiku = "<think>Autumn rain falls soft\nOn the quiet, empty street\nLeaves drift in the cold</think>";
        assert_eq!(loop_start(haiku, L), None);
        let table = format!("| a | b |\n{}", "|---|---|\n".repeat(3));
        assert_eq!(loop_start(&table, L), None);
        let plan = r#"<planned_step>[{"step_intention": "Write the haiku", "type": "skill", "executor": "think", "text_content": "Write it"}, {"step_intention": "Report it", "type": "skill", "executor": "summary", "text_content": "Report"}]</planned_step>"#;
        assert_eq!(loop_start(plan, L), None);
        assert_eq!(loop_start(&format!("done{}", " ".repeat(500)), L), None);
        assert_eq!(loop_start(&format!("rule\n{}", "-".repeat(400)), L), None);
        assert_eq!(
            loop_start(&format!("zeros: {}", "0, ".repeat(200)), L),
            None
        );
        assert_eq!(loop_start("", L), None);
    }

    #[test]
    fn multibyte_text_is_cut_on_a_character_boundary() {
        let text = "秋雨落在屋顶上，".repeat(20);
        let cut = loop_start(&text, L).expect("a loop");
        assert!(text.is_char_boundary(cut));
        assert_eq!(&text[..cut], "秋雨落在屋顶上，");
    }
}
