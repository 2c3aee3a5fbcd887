//! What a setting is: a row of [`super::overrides::SETTINGS`] — its name, the pipeline key it
//! replaces, its [`Kind`], its [`Flag`] (the command line's), its words — and how the command
//! line declares and reads back its flag ([`Setting::args`], [`SettingValue`]). The table
//! itself, and the [`super::Overrides`] made from it, are `overrides.rs`'s.

use super::overrides::SETTINGS;
use clap::builder::ValueParser;
use clap::{Arg, ArgAction, ArgMatches};
use std::path::PathBuf;

/// The kind of value a setting takes (what the Python package is told, and how the command
/// line reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A local path (made absolute by the Python package; a relative one is the working
    /// directory's) or a store URL (`s3://bucket/prefix`, taken as given).
    Path,
    /// A whole number.
    Int,
    /// `true` or `false`; on the command line a switch and, where it has one, its negation.
    Bool,
    /// Free text checked by the setting (an URL, a byte size such as `20GB`).
    Text,
    /// One of named values ([`Setting::choices`]).
    Choice,
}

/// Which of the command line's flag groups a setting's flag is in: a subcommand takes a
/// group whole (`convert` takes no `--on-error`, `merge-index` none of these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FlagGroup {
    /// Where the data is (`--data`, `--usage`, the store's flags).
    Input,
    /// Threads and batches.
    Engine,
    /// The sampler: order and data-parallel sharding.
    Sampling,
    /// What a bad sample does.
    Errors,
}

/// A setting's command-line flag.
#[derive(Clone, Copy, Debug)]
pub struct Flag {
    /// `--LONG`.
    pub long: &'static str,
    /// Its value's name in the help (`--batch-size <BATCH_SIZE>`).
    pub value_name: &'static str,
    /// The group that holds it.
    pub group: FlagGroup,
    /// A [`Kind::Bool`] setting's flag for `false` (`--no-shuffle`), with its help.
    pub negation: Option<(&'static str, &'static str)>,
}

/// One setting: a row of [`SETTINGS`].
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// Its name: the [`Overrides`](super::Overrides) field, the key of the overrides' JSON and the Python
    /// keyword.
    pub name: &'static str,
    /// The pipeline table it replaces a key of (`source`, `batch`, `engine`).
    pub table: &'static str,
    /// The key it replaces in that table.
    pub key: &'static str,
    /// What it takes.
    pub kind: Kind,
    /// Its flag; `None` where only the Python package changes it.
    pub flag: Option<Flag>,
    /// Its field's doc, as written ([`Setting::doc`] is its first paragraph).
    pub(super) text: &'static str,
    /// The default of the pipeline key, in words (`default 0`), where one is worth saying.
    pub default: Option<&'static str>,
    /// The command line's parser of its value.
    pub(super) parser: fn() -> ValueParser,
}

impl Setting {
    /// The row named `name`.
    pub fn named(name: &str) -> Option<&'static Setting> {
        SETTINGS.iter().find(|s| s.name == name)
    }

    /// What it is, in a sentence without the pipeline key or the default: the first
    /// paragraph of its [`Overrides`](super::Overrides) field's doc, on one line.
    pub fn doc(&self) -> String {
        let lines = self.text.lines().map(str::trim);
        let paragraph: Vec<&str> = lines.take_while(|l| !l.is_empty()).collect();
        paragraph.join(" ")
    }

    /// The names a [`Kind::Choice`] takes (empty for the other kinds).
    pub fn choices(&self) -> Vec<String> {
        if self.kind != Kind::Choice {
            return Vec::new();
        }
        (self.parser)()
            .possible_values()
            .map(|values| values.map(|v| v.get_name().to_string()).collect())
            .unwrap_or_default()
    }

    /// The doc with the key it overrides and its default: the flag's help (no final
    /// period, as clap writes a one-line doc).
    pub fn help(&self) -> String {
        let default = self.default.map(|d| format!(" ({d})")).unwrap_or_default();
        format!(
            "{}, overriding `{}.{}`{default}",
            self.doc().trim_end_matches('.'),
            self.table,
            self.key
        )
    }

    /// Its flags (none, one, or a switch and its negation), as the command line declares
    /// them.
    pub fn args(&self) -> Vec<Arg> {
        let Some(flag) = self.flag else {
            return Vec::new();
        };
        let arg = Arg::new(self.name).long(flag.long).help(self.help());
        if self.kind != Kind::Bool {
            let arg = arg
                .value_name(flag.value_name)
                .value_parser((self.parser)())
                .action(ArgAction::Set);
            return vec![arg];
        }
        let mut arg = arg.action(ArgAction::SetTrue);
        let mut args = Vec::new();
        if let Some((negation, help)) = flag.negation {
            arg = arg.overrides_with(negation);
            args.push(
                Arg::new(negation)
                    .long(negation)
                    .help(help)
                    .action(ArgAction::SetTrue)
                    .overrides_with(self.name),
            );
        }
        args.insert(0, arg);
        args
    }
}

/// A setting's type: its [`Kind`], its command-line parser and how its value is read back
/// from a parsed command line.
pub(super) trait SettingValue: Sized + Clone + Send + Sync + 'static {
    const KIND: Kind;
    fn parser() -> ValueParser;
    /// The value given for `row` (`None` when its flag was not given, or its subcommand
    /// does not take it).
    fn read(m: &ArgMatches, row: &Setting) -> Option<Self> {
        m.try_get_one::<Self>(row.name).ok().flatten().cloned()
    }
}

impl SettingValue for PathBuf {
    const KIND: Kind = Kind::Path;
    fn parser() -> ValueParser {
        clap::value_parser!(PathBuf)
    }
}

impl SettingValue for usize {
    const KIND: Kind = Kind::Int;
    fn parser() -> ValueParser {
        clap::value_parser!(usize).into()
    }
}

impl SettingValue for u64 {
    const KIND: Kind = Kind::Int;
    fn parser() -> ValueParser {
        clap::value_parser!(u64).into()
    }
}

impl SettingValue for String {
    const KIND: Kind = Kind::Text;
    fn parser() -> ValueParser {
        ValueParser::string()
    }
}

impl SettingValue for bool {
    const KIND: Kind = Kind::Bool;
    fn parser() -> ValueParser {
        ValueParser::bool()
    }
    /// `Some(true)` for the switch, `Some(false)` for its negation (clap keeps the last of
    /// the two given), `None` for neither.
    fn read(m: &ArgMatches, row: &Setting) -> Option<bool> {
        let on = |id: &str| m.try_get_one::<bool>(id).ok().flatten() == Some(&true);
        let negation = row.flag.and_then(|f| f.negation).map(|(n, _)| n);
        if on(row.name) {
            Some(true)
        } else {
            negation.filter(|n| on(n)).map(|_| false)
        }
    }
}

/// A flag in `group`, its value named `value`.
pub(super) const fn flag(
    long: &'static str,
    value_name: &'static str,
    group: FlagGroup,
) -> Option<Flag> {
    Some(Flag {
        long,
        value_name,
        group,
        negation: None,
    })
}
