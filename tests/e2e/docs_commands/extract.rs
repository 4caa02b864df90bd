//! The `ironlun` command lines of a Markdown file's fenced code blocks,
//! and the shell variables those blocks set, in the order written.
//!
//! A ```sh, ```bash or ```shell block is a script: every line is read.
//! A ```console block or one with no language shows a terminal: only
//! lines after a `$ ` prompt are commands (the rest is output, or a
//! table). Blocks in any other language (toml, json, text…) are not
//! read. A line ending in `\` goes on on the next; `#` starting a word
//! outside quotes starts a comment; leading `NAME=VALUE` words are the
//! command's environment; a line of assignments alone sets variables.

use std::path::Path;

/// One command line of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocCommand {
    /// The document, relative to the repository (`docs/admin.md`).
    pub file: String,
    /// The line it starts on, from 1.
    pub line: usize,
    /// The command as written, continuations joined and white space
    /// collapsed, without its comment: the key of the exclusion table.
    pub text: String,
    /// It ends in `&`: it runs in the background while the file's
    /// later commands run.
    pub background: bool,
    /// The exit status the document gives it: 0 unless its comment
    /// starts `exit N`.
    pub expect: i32,
}

/// What a document's blocks hold, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Command(DocCommand),
    /// `NAME=VALUE` on a line of its own (the value unquoted).
    Assign {
        name: String,
        value: String,
    },
}

/// How a fenced block is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Script,
    Terminal,
    Other,
}

fn block_kind(info: &str) -> Block {
    match info.split_whitespace().next().unwrap_or("") {
        "sh" | "bash" | "shell" => Block::Script,
        "" | "console" => Block::Terminal,
        _ => Block::Other,
    }
}

/// The items of a document's text; `file` names it in each command.
pub fn items(file: &str, text: &str) -> Vec<Item> {
    let mut out = Vec::new();
    let mut block: Option<Block> = None;
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let trimmed = raw.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            block = match block {
                None => Some(block_kind(info)),
                Some(_) => None,
            };
            pending = None;
            continue;
        }
        let Some(kind) = block else { continue };
        let (start, mut body) = match pending.take() {
            Some((start, so_far)) => (start, format!("{so_far} {}", continued(trimmed))),
            None => match kind {
                Block::Script => (number, trimmed.to_owned()),
                Block::Terminal => match trimmed.strip_prefix("$ ") {
                    Some(cmd) => (number, cmd.to_owned()),
                    None => continue,
                },
                Block::Other => continue,
            },
        };
        if let Some(head) = body.trim_end().strip_suffix('\\') {
            pending = Some((start, head.trim_end().to_owned()));
            continue;
        }
        body = body.trim().to_owned();
        out.extend(line_items(file, start, &body));
    }
    out
}

/// A continuation line, without a `> ` prompt a terminal may show.
fn continued(line: &str) -> &str {
    line.strip_prefix("> ").unwrap_or(line).trim()
}

/// The items of one logical line: an `ironlun` command, or the
/// variables a line of assignments alone sets.
fn line_items(file: &str, line: usize, logical: &str) -> Vec<Item> {
    let (code, comment) = split_comment(logical);
    let code = collapse(code);
    let Some(words) = shlex::split(&code[..stage_end(&code)]) else {
        return Vec::new();
    };
    let Some(first) = words.iter().position(|w| assignment(w).is_none()) else {
        return words
            .iter()
            .filter_map(|w| assignment(w))
            .map(|(name, value)| Item::Assign {
                name: name.to_owned(),
                value: value.to_owned(),
            })
            .collect();
    };
    if words.get(first).map(String::as_str) != Some("ironlun") {
        return Vec::new();
    }
    let background = code.ends_with('&') && !code.ends_with("&&");
    vec![Item::Command(DocCommand {
        file: file.to_owned(),
        line,
        expect: expected_exit(comment),
        background,
        text: code,
    })]
}

/// `NAME=VALUE` split, when `word` is one.
pub fn assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let mut chars = name.chars();
    let head = chars.next()?;
    let ok = (head.is_ascii_alphabetic() || head == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then_some((name, value))
}

/// The status a comment gives: `# exit 2` (or `# exit 2: why`) is 2;
/// any other comment, or none, is 0.
fn expected_exit(comment: &str) -> i32 {
    comment
        .trim()
        .strip_prefix("exit ")
        .and_then(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or(0)
}

/// White space runs as one space, outside quotes too (the docs quote
/// no runs of spaces).
fn collapse(code: &str) -> String {
    code.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The byte offsets of the characters outside quotes and escapes.
fn unquoted(s: &str) -> Vec<(usize, char)> {
    let mut out = Vec::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (at, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (Some('"'), '"') => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, _) => out.push((at, c)),
        }
    }
    out
}

/// Code and comment: a `#` outside quotes at the start of a word.
pub fn split_comment(line: &str) -> (&str, &str) {
    for (at, c) in unquoted(line) {
        let word_start = line[..at].chars().last().is_none_or(char::is_whitespace);
        if c == '#' && word_start {
            return (line[..at].trim_end(), &line[at + 1..]);
        }
    }
    (line.trim_end(), "")
}

/// Where the first command of a line ends: its first `|`, `>`, `<`,
/// `;` or `&` outside quotes (pipes, redirections, lists, `&`).
pub fn stage_end(code: &str) -> usize {
    unquoted(code)
        .into_iter()
        .find(|(_, c)| matches!(c, '|' | '>' | '<' | ';' | '&'))
        .map_or(code.len(), |(at, _)| at)
}

/// README.md and every docs/*.md, with their items, in name order.
pub fn documents(root: &Path) -> Vec<(String, Vec<Item>)> {
    let mut names = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| {
            e.expect("docs/ entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(root.join(&name)).expect("read a document");
            let found = items(&name, &text);
            (name, found)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands(md: &str) -> Vec<DocCommand> {
        items("x.md", md)
            .into_iter()
            .filter_map(|i| match i {
                Item::Command(c) => Some(c),
                Item::Assign { .. } => None,
            })
            .collect()
    }

    #[test]
    fn script_blocks_read_every_line_and_join_continuations() {
        let md = "text\n```sh\n# a comment line\nironlun bench $URL --bs 4k   # why\n\
                  ironlun sweep --set a=1 \\\n    --vary b=1,2 \\\n    --rows b\n\
                  curl -s http://x/\n```\n";
        let c = commands(md);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].text, "ironlun bench $URL --bs 4k");
        assert_eq!(c[0].line, 4);
        assert_eq!(c[1].text, "ironlun sweep --set a=1 --vary b=1,2 --rows b");
        assert_eq!(c[1].line, 5);
        assert!(c.iter().all(|c| c.expect == 0 && !c.background));
    }

    #[test]
    fn terminal_and_unlabelled_blocks_read_only_prompted_lines() {
        let md = "```\n ironlun-lab   embedded targets\n$ ironlun admin state | head -1\n\
                  portals: 1\n```\n```console\n$ ironlun target --lun ram:1000 \\\n> --check   # exit 2\n\
                  ironlun: --lun: not whole blocks\n```\n```toml\nironlun = 1\n```\n";
        let c = commands(md);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[0].text, "ironlun admin state | head -1");
        assert_eq!(c[1].text, "ironlun target --lun ram:1000 --check");
        assert_eq!((c[1].line, c[1].expect), (7, 2));
    }

    #[test]
    fn environment_background_and_assignments() {
        let md = "```bash\nIRONLUN_CHAP='a:b c' \\\n  ironlun target --lun ram:1GiB &\n\
                  URL=iscsi://127.0.0.1:3260/iqn.2026-11.test:t/0\nX=1 other-tool\n```\n";
        let all = items("x.md", md);
        assert_eq!(all.len(), 2, "{all:?}");
        let Item::Command(c) = &all[0] else { panic!() };
        assert_eq!(
            c.text,
            "IRONLUN_CHAP='a:b c' ironlun target --lun ram:1GiB &"
        );
        assert!(c.background);
        assert_eq!(
            all[1],
            Item::Assign {
                name: "URL".into(),
                value: "iscsi://127.0.0.1:3260/iqn.2026-11.test:t/0".into()
            }
        );
    }

    #[test]
    fn comments_respect_quotes_and_words() {
        assert_eq!(split_comment("a 'b # c' d # e"), ("a 'b # c' d", " e"));
        assert_eq!(split_comment("a x#y"), ("a x#y", ""));
        assert_eq!(expected_exit(" exit 2: a bad size"), 2);
        assert_eq!(expected_exit(" exits 2"), 0);
        assert_eq!(expected_exit(" built-in workloads"), 0);
        assert_eq!(stage_end("ironlun a '|' b | head"), 16);
        assert_eq!(stage_end("ironlun x > f"), 10);
    }
}
