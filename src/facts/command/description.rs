//! A program's closed description (`[[program]]` in `commands.toml`): the
//! options it may take, how its operands are read, what its script may
//! say, and which options and operands name files it writes. A command gets
//! the description's class only when every word fits; anything the
//! description does not list (an option, a combined short flag holding one,
//! an `--opt=value` form, a word that may split into options) means the
//! command is not proven, and it falls to the other rules.

use std::collections::HashSet;

use super::pattern::Pattern;

use super::parse::{UNQUOTED_EXPANSION, is_quoted_expansion};

/// Which operands a program writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputOperands {
    None,
    All,
    Last,
}

#[derive(Debug, Clone)]
pub struct Script {
    /// Options whose value is a script (`sed -e`, `awk -e`).
    pub options: HashSet<String>,
    /// Without a script option, the first operand is the script.
    pub operand: bool,
    /// Every script must match this in full.
    pub pattern: Option<Pattern>,
    /// No script may contain a match of this.
    pub unless: Option<Pattern>,
}

/// How a program reads every file under the folders it is given (`grep
/// -r`, `rg`, `find -exec`): what such a walk reaches is read too, secrets
/// included.
#[derive(Debug, Clone, Default)]
pub struct Walk {
    /// It reads folders without being asked (`rg`).
    pub always: bool,
    /// Flags that make it read folders (`grep -r`, `find -exec`).
    pub flags: HashSet<String>,
    /// It skips hidden files and what ignore files exclude, as ripgrep does.
    pub visible_only: bool,
    /// Flags that make a `visible_only` walk read everything (`rg -u`).
    pub everything_flags: HashSet<String>,
    /// Options whose value is a glob of the only files read (`grep
    /// --include`).
    pub only_options: HashSet<String>,
    /// Options whose value is a glob of files or folders not read (`grep
    /// --exclude`, `--exclude-dir`).
    pub skip_options: HashSet<String>,
    /// Options whose value is a ripgrep glob: `GLOB` reads only what
    /// matches, `!GLOB` skips it (`rg -g`).
    pub glob_options: HashSet<String>,
    /// It lists every folder under the folders it is given without being
    /// asked (`du`, `find`, `tree`): a secret folder in the tree is listed.
    pub lists: bool,
    /// Flags that make it list them (`ls -R`).
    pub list_flags: HashSet<String>,
}

/// Which uses of a description do something: print what a repository
/// tracks (`git grep`: every tracked file is read, a tracked `.env` too,
/// though no word names it), print from its history (`git show`, `git log
/// -p`), or take revisions as operands (`git diff HEAD~3`).
#[derive(Debug, Clone, Default)]
pub struct Uses {
    /// Every use of the description does.
    pub always: bool,
    /// The subcommands of the description that do.
    pub subcommands: Vec<Vec<String>>,
    /// Flags and options that make it do so (`-p`, `-U3`, `--word-diff`).
    pub flags: HashSet<String>,
}

impl Uses {
    /// Whether `words`, from the subcommand on, are a use that does,
    /// whatever its options (`git show`).
    pub fn by_subcommand(&self, words: &[String]) -> bool {
        self.always || self.subcommands.iter().any(|sub| starts_with(words, sub))
    }

    fn any(&self) -> bool {
        self.always || !self.subcommands.is_empty() || !self.flags.is_empty()
    }
}

/// The folders a command reads every file under.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalkScope {
    /// Its operands (those that are folders are walked; with none, and at
    /// most one operand, which is then a pattern, the current folder).
    pub operands: Vec<String>,
    /// Hidden and ignored files are read too.
    pub everything: bool,
    /// Globs in ripgrep's form that narrow what is read: `GLOB` reads only
    /// what matches, `!GLOB` skips it.
    pub globs: Vec<String>,
    /// Only the folders' names are read (a listing), not the files in them:
    /// only a secret folder reached counts.
    pub names_only: bool,
}

#[derive(Debug, Clone)]
pub struct Description {
    pub names: Vec<String>,
    pub class: String,
    /// Words that must come first (after the program's global options),
    /// one sequence of several alternatives: `git log`, `git stash list`.
    pub subcommands: Vec<Vec<String>>,
    pub flags: HashSet<String>,
    /// Options that take a value: the next word, the rest of a short
    /// cluster (`-k2`), or `--opt=value`.
    pub options: HashSet<String>,
    /// Options that take two values (`jq --arg NAME VALUE`).
    pub pair_options: HashSet<String>,
    /// Whole words accepted as flags (`head -20`).
    pub flag_pattern: Option<Pattern>,
    /// Single-dash long options (`find -name`, `xxd -cols`): a word is
    /// matched whole, never split into a cluster of short flags.
    pub whole_words: bool,
    /// Every word is an operand; the program has no options that matter
    /// (`echo`, `true`).
    pub free_words: bool,
    pub max_operands: Option<usize>,
    pub operand_pattern: Option<Pattern>,
    pub script: Option<Script>,
    /// Options whose value is a file written (`sort -o`, `find -fprint`).
    pub output_options: HashSet<String>,
    /// Flags that make every operand a file written in place (`sed -i`);
    /// they may carry an attached suffix (`-i.bak`, `--in-place=.bak`).
    pub output_flags: HashSet<String>,
    pub output_operands: OutputOperands,
    /// Operands `KEY=FILE` whose file is written (`dd of=FILE`).
    pub output_assignments: Vec<String>,
    pub walk: Walk,
    pub tracked: Uses,
    pub history: Uses,
    /// Uses that print the notes of the commits they show (`git log`).
    pub notes: Uses,
    /// Uses whose operands before `--` may name revisions.
    pub revisions: Uses,
    /// Flags that make it print names, counts or object names instead of
    /// content (`git diff --stat`): with one, and none of the tracked
    /// read's flags (the formats that print content), it prints no file's
    /// content, whatever it compares.
    pub names_only_flags: HashSet<String>,
    /// Flags that stop it printing notes, unless a flag that prints them
    /// comes later (`git log --no-notes`).
    pub no_notes_flags: HashSet<String>,
}

/// What a description makes of a program's words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// Every word is one the description allows.
    pub fits: bool,
    /// Files the words say the program writes.
    pub writes: Vec<String>,
    /// The folders it reads every file under.
    pub walk: Option<WalkScope>,
    /// It prints what the repository tracks.
    pub reads_tracked: bool,
    /// It prints from the repository's history by its flags.
    pub reads_history: bool,
    /// Its operands before `--`, when the description's uses may take
    /// revisions (which of them do is the subcommand's to say).
    pub leading_operands: Vec<String>,
    /// It prints names, not content, whatever it reads.
    pub names_only: bool,
    /// What its last flag about notes says: they are printed (`--notes`)
    /// or not (`--no-notes`); `None` when it has none.
    pub shows_notes: Option<bool>,
}

enum Word<'a> {
    Flag,
    Value,
    Output(&'a str),
    OutputFlag,
    Script(&'a str),
    Unknown,
}

impl Description {
    /// Whether the description is about `words` at all: its subcommand
    /// (if any) starts them. Returns the words after the subcommand.
    pub fn applies<'w>(&self, words: &'w [String]) -> Option<&'w [String]> {
        if self.subcommands.is_empty() {
            return Some(words);
        }
        self.subcommands
            .iter()
            .find_map(|sub| starts_with(words, sub).then(|| &words[sub.len()..]))
    }

    /// Reads `words` (after the subcommand) against the description. The
    /// scan goes on past a word that does not fit, so that the files a
    /// command writes are found even when it is not read-only.
    pub fn scan(&self, words: &[String]) -> Scan {
        let mut scan = Scan {
            fits: true,
            ..Scan::default()
        };
        let mut read = Reading {
            walking: self.walk.always,
            listing: self.walk.lists,
            everything: !self.walk.visible_only,
            ..Reading::default()
        };
        let mut index = 0;
        let mut options_end = self.free_words;
        while index < words.len() {
            let word = words[index].as_str();
            index += 1;
            if options_end || !looks_like_option(word) {
                // Word splitting may turn it into options; past `--` it
                // is still an operand no one can read, which may name any
                // file (`ls | xargs wc -l --` reads what `ls` lists).
                if word == UNQUOTED_EXPANSION && !(options_end && self.free_words) {
                    scan.fits = false;
                }
                if !options_end && self.revisions.any() {
                    scan.leading_operands.push(word.to_owned());
                }
                read.operands.push(word);
                continue;
            }
            if word == "--" && !self.whole_words {
                options_end = true;
                continue;
            }
            self.read_walk_option(word, words.get(index).map(String::as_str), &mut read);
            scan.reads_tracked |= self.names_one_of(word, &self.tracked.flags);
            scan.reads_history |= self.names_one_of(word, &self.history.flags);
            scan.names_only |= self.names_one_of(word, &self.names_only_flags);
            if self.names_one_of(word, &self.notes.flags) {
                scan.shows_notes = Some(true);
            } else if self.names_one_of(word, &self.no_notes_flags) {
                scan.shows_notes = Some(false);
            }
            for item in self.read_option(word, words, &mut index) {
                match item {
                    Word::Flag | Word::Value => {}
                    Word::Output(path) => scan.writes.push(path.to_owned()),
                    Word::OutputFlag => read.in_place = true,
                    Word::Script(script) => read.scripts.push(script),
                    Word::Unknown => scan.fits = false,
                }
            }
        }
        // A format that prints content (a tracked read's flag) outweighs
        // one that prints names; what the names are of (`--cached`, a
        // revision) does not matter then.
        scan.names_only &= !scan.reads_tracked;
        if scan.names_only {
            scan.reads_history = false;
            scan.leading_operands.clear();
        } else {
            scan.reads_tracked |= self.tracked.always;
            scan.reads_history |= self.history.always;
        }
        self.judge_scripts(&mut read, &mut scan);
        self.judge_operands(&read, &mut scan);
        self.conclude(read, &mut scan);
        scan
    }

    /// What an option says about the tree the command walks: whether it
    /// walks or lists, everything or the visible entries, and which globs.
    fn read_walk_option(&self, word: &str, next: Option<&str>, read: &mut Reading<'_>) {
        let holds =
            |flags: &HashSet<String>| flags.contains(word) || self.cluster_holds(word, flags);
        read.walking |= holds(&self.walk.flags);
        read.listing |= holds(&self.walk.list_flags);
        read.everything |= holds(&self.walk.everything_flags);
        if let Some(glob) = option_value(word, next, &self.walk.only_options) {
            read.globs.push(glob.to_owned());
        }
        if let Some(glob) = option_value(word, next, &self.walk.skip_options) {
            read.globs.push(format!("!{glob}"));
        }
        if let Some(glob) = option_value(word, next, &self.walk.glob_options) {
            read.globs.push(glob.to_owned());
        }
    }

    /// The scripts a program runs (an option's, or its first operand) must
    /// be ones the description lets through.
    fn judge_scripts(&self, read: &mut Reading<'_>, scan: &mut Scan) {
        let Some(script) = &self.script else {
            return;
        };
        if script.operand && read.scripts.is_empty() && !read.operands.is_empty() {
            let first = read.operands.remove(0);
            read.scripts.push(first);
        }
        for text in &read.scripts {
            let whole = script
                .pattern
                .as_ref()
                .is_none_or(|p| p.matches_whole_or(text, false));
            let clean = script
                .unless
                .as_ref()
                .is_none_or(|u| !u.is_match_or(text, true));
            if !whole || !clean || *text == UNQUOTED_EXPANSION || is_quoted_expansion(text) {
                scan.fits = false;
            }
        }
    }

    /// The operands must be as many and as shaped as the description says.
    fn judge_operands(&self, read: &Reading<'_>, scan: &mut Scan) {
        if self
            .max_operands
            .is_some_and(|max| read.operands.len() > max)
        {
            scan.fits = false;
        }
        if let Some(pattern) = &self.operand_pattern
            && !read
                .operands
                .iter()
                .all(|o| pattern.matches_whole_or(o, false))
        {
            scan.fits = false;
        }
    }

    /// The files the command writes, the tree it walks, and whether it
    /// still fits its class.
    fn conclude(&self, read: Reading<'_>, scan: &mut Scan) {
        let operands = &read.operands;
        let written: &[&str] = match (read.in_place, self.output_operands) {
            (true, _) | (false, OutputOperands::All) => operands,
            (false, OutputOperands::Last) if operands.len() > 1 => &operands[operands.len() - 1..],
            _ => &[],
        };
        scan.writes.extend(written.iter().map(|w| (*w).to_owned()));
        for operand in operands {
            if let Some((key, file)) = operand.split_once('=')
                && self.output_assignments.iter().any(|k| k == key)
            {
                scan.writes.push(file.to_owned());
            }
        }
        if read.walking || read.listing {
            scan.walk = Some(WalkScope {
                operands: operands.iter().map(|o| (*o).to_owned()).collect(),
                everything: read.everything || !read.walking,
                globs: read.globs,
                names_only: !read.walking,
            });
        }
        if !scan.writes.is_empty() {
            // A program that writes a file is not what its class says.
            scan.fits = false;
        }
    }

    /// Whether an option word names one of `names`: `--opt`, `--opt=value`,
    /// a single-dash long option, or a cluster of short flags up to the
    /// option that takes the rest as its value (`-wU3` names `-w` and
    /// `-U`, `-np` only `-n`).
    fn names_one_of(&self, word: &str, names: &HashSet<String>) -> bool {
        if names.is_empty() {
            return false;
        }
        if word.starts_with("--") || self.whole_words {
            let name = match word.split_once('=') {
                Some((name, _)) if word.starts_with("--") => name,
                _ => word,
            };
            return names.contains(name);
        }
        for c in word.chars().skip(1) {
            let name = format!("-{c}");
            if names.contains(&name) {
                return true;
            }
            if !self.flags.contains(&name) || self.takes_value(&name) {
                return false;
            }
        }
        false
    }

    fn takes_value(&self, name: &str) -> bool {
        self.options.contains(name)
            || self.output_options.contains(name)
            || self
                .script
                .as_ref()
                .is_some_and(|s| s.options.contains(name))
    }

    /// Whether a cluster of short flags (`-rn`) holds one of `flags`.
    fn cluster_holds(&self, word: &str, flags: &HashSet<String>) -> bool {
        if self.whole_words || word.starts_with("--") || flags.is_empty() {
            return false;
        }
        word.chars()
            .skip(1)
            .map(|c| format!("-{c}"))
            .take_while(|name| {
                // A value-taking option ends the cluster: the rest is its value.
                !self.options.contains(name) || self.flags.contains(name)
            })
            .any(|name| flags.contains(&name))
    }

    /// One option word: a long option, a single-dash long option, or a
    /// cluster of short flags. Consumes the values it takes.
    fn read_option<'a>(
        &self,
        word: &'a str,
        words: &'a [String],
        index: &mut usize,
    ) -> Vec<Word<'a>> {
        if self
            .flag_pattern
            .as_ref()
            .is_some_and(|p| p.matches_whole_or(word, false))
        {
            return vec![Word::Flag];
        }
        let mut next = || {
            let value = words.get(*index).map(String::as_str);
            *index += 1;
            value
        };
        if word.starts_with("--") || self.whole_words {
            let (name, attached) = match word.split_once('=') {
                Some((name, value)) if word.starts_with("--") => (name, Some(value)),
                _ => (word, None),
            };
            return vec![self.long(name, attached, &mut next)];
        }
        let mut items = Vec::new();
        for (at, c) in word.char_indices().skip(1) {
            let name = format!("-{c}");
            let rest = &word[at + c.len_utf8()..];
            let attached = (!rest.is_empty()).then_some(rest);
            let takes_value = self.takes_value(&name);
            if takes_value && (attached.is_some() || !self.flags.contains(&name)) {
                items.push(self.long(&name, attached, &mut next));
                return items;
            }
            if self.flags.contains(&name) {
                items.push(Word::Flag);
                continue;
            }
            if self.output_flags.contains(&name) {
                // `-i.bak`: the rest of the cluster is the suffix.
                items.push(Word::OutputFlag);
                return items;
            }
            items.push(Word::Unknown);
            return items;
        }
        items
    }

    fn long<'a>(
        &self,
        name: &str,
        attached: Option<&'a str>,
        next: &mut impl FnMut() -> Option<&'a str>,
    ) -> Word<'a> {
        let mut value = || attached.or_else(&mut *next);
        if attached.is_none() && self.flags.contains(name) {
            return Word::Flag;
        }
        if self.output_flags.contains(name) {
            return Word::OutputFlag;
        }
        if self.output_options.contains(name) {
            return value().map_or(Word::Unknown, Word::Output);
        }
        if self
            .script
            .as_ref()
            .is_some_and(|s| s.options.contains(name))
        {
            return value().map_or(Word::Unknown, Word::Script);
        }
        if self.options.contains(name) {
            return value().map_or(Word::Unknown, |_| Word::Value);
        }
        if self.pair_options.contains(name) && attached.is_none() {
            return match (next(), next()) {
                (Some(_), Some(_)) => Word::Flag,
                _ => Word::Unknown,
            };
        }
        Word::Unknown
    }
}

/// The value `word` gives one of `options`: `--opt=value`, `--opt value`,
/// `-o value` or `-ovalue`.
fn option_value<'a>(
    word: &'a str,
    next: Option<&'a str>,
    options: &HashSet<String>,
) -> Option<&'a str> {
    if options.is_empty() {
        return None;
    }
    if let Some((name, value)) = word.split_once('=')
        && word.starts_with("--")
        && options.contains(name)
    {
        return Some(value);
    }
    if options.contains(word) {
        return next;
    }
    let short = word
        .get(..2)
        .filter(|s| !word.starts_with("--") && options.contains(*s))?;
    word.get(short.len()..).filter(|rest| !rest.is_empty())
}

/// Whether `words` begin with the words of `subcommand`.
fn starts_with(words: &[String], subcommand: &[String]) -> bool {
    words.len() >= subcommand.len() && words.iter().zip(subcommand).all(|(w, s)| w == s)
}

/// An option word: starts with `-` and is more than `-` (stdin).
fn looks_like_option(word: &str) -> bool {
    word.len() > 1 && word.starts_with('-')
}

/// What a scan has read of a command's words so far.
#[derive(Default)]
struct Reading<'w> {
    operands: Vec<&'w str>,
    scripts: Vec<&'w str>,
    /// An option says the operands are written in place.
    in_place: bool,
    walking: bool,
    listing: bool,
    /// Hidden and ignored entries are walked too.
    everything: bool,
    globs: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> HashSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    fn sort() -> Description {
        Description {
            names: vec!["sort".into()],
            class: "read_only".into(),
            subcommands: Vec::new(),
            flags: set(&["-n", "-r", "-u", "--reverse", "-c", "--check"]),
            options: set(&["-k", "-t", "--key", "--check"]),
            pair_options: HashSet::new(),
            flag_pattern: None,
            whole_words: false,
            free_words: false,
            max_operands: None,
            operand_pattern: None,
            script: None,
            output_options: set(&["-o", "--output"]),
            output_flags: HashSet::new(),
            output_operands: OutputOperands::None,
            output_assignments: Vec::new(),
            walk: Walk::default(),
            tracked: Uses::default(),
            history: Uses::default(),
            notes: Uses::default(),
            revisions: Uses::default(),
            names_only_flags: HashSet::new(),
            no_notes_flags: HashSet::new(),
        }
    }

    #[test]
    fn listed_options_fit_in_every_form() {
        let d = sort();
        for ok in [
            "names.txt",
            "-n names.txt",
            "-nr names.txt",
            "-k 2 -t , f",
            "-k2 f",
            "-rk2 f",
            "--key=2 f",
            "--key 2 f",
            "--reverse f",
            "--check f",
            "--check=quiet f",
            "-- -o",
            "-",
        ] {
            assert!(d.scan(&words(ok)).fits, "{ok}");
        }
    }

    #[test]
    fn unlisted_options_and_outputs_do_not_fit() {
        let d = sort();
        for bad in [
            "-T /tmp f",
            "-nT f",
            "--compress-program=sh f",
            "--reverse=x f",
            "-k",
            UNQUOTED_EXPANSION,
        ] {
            assert!(!d.scan(&words(bad)).fits, "{bad}");
        }
        for (text, written) in [
            ("-o out f", "out"),
            ("-oout f", "out"),
            ("-no out f", "out"),
            ("--output=.git/config f", ".git/config"),
            ("--output .git/x f", ".git/x"),
        ] {
            let scan = d.scan(&words(text));
            assert!(!scan.fits, "{text}");
            assert_eq!(scan.writes, vec![written.to_owned()], "{text}");
        }
    }

    #[test]
    fn scripts_are_judged_whole() {
        let mut d = sort();
        d.script = Some(Script {
            options: set(&["-e", "--expression"]),
            operand: true,
            pattern: Some(Pattern::new("[0-9,]*p").unwrap()),
            unless: Some(Pattern::new("e").unwrap()),
        });
        assert!(d.scan(&words("1,5p f")).fits);
        assert!(d.scan(&words("-e 1,5p f")).fits);
        assert!(!d.scan(&words("1,5w f")).fits);
        assert!(!d.scan(&words("-e 1e")).fits);
        assert!(!d.scan(&words("-e1w f")).fits);
    }

    #[test]
    fn in_place_flags_and_output_operands_name_the_files_written() {
        let mut d = sort();
        d.output_flags = set(&["-i", "--in-place"]);
        assert_eq!(d.scan(&words("-i a b")).writes, vec!["a", "b"]);
        assert_eq!(d.scan(&words("-i.bak a")).writes, vec!["a"]);
        assert_eq!(d.scan(&words("-ni a")).writes, vec!["a"]);
        assert_eq!(d.scan(&words("--in-place=.b a")).writes, vec!["a"]);
        d.output_operands = OutputOperands::Last;
        assert_eq!(d.scan(&words("-n a b c")).writes, vec!["c"]);
        assert!(d.scan(&words("a")).writes.is_empty());
    }

    #[test]
    fn subcommands_select_the_description() {
        let mut d = sort();
        d.subcommands = vec![words("stash list"), words("log")];
        assert_eq!(d.applies(&words("log -n")), Some(&words("-n")[..]));
        assert_eq!(d.applies(&words("stash list")), Some(&[][..]));
        assert_eq!(d.applies(&words("stash pop")), None);
        assert_eq!(d.applies(&words("logs")), None);
    }

    #[test]
    fn operand_limits() {
        let mut d = sort();
        d.max_operands = Some(0);
        assert!(d.scan(&words("-n")).fits);
        assert!(!d.scan(&words("name")).fits);
        d.max_operands = None;
        d.operand_pattern = Some(Pattern::new(r"\+.*").unwrap());
        assert!(d.scan(&words("+%s")).fits);
        assert!(!d.scan(&words("0101")).fits);
    }
}
