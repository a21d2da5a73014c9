//! Trees by name: how the command line, remote workers and checkpoints build a tree from a
//! [`TreeSpec`] (a name and its options).
//!
//! A program built on the bts library registers its own trees next to the built-in ones and runs
//! [`crate::cli::main_with`]; its workers then build the same trees by name.

use crate::{Optimise, Tree};
use bts_protocol::TreeSpec;
use bts_worker::{Searcher, TreeSearcher};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a tree could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("unknown tree '{name}' (known trees: {known})")]
    Unknown { name: String, known: String },
    /// The tree's options are wrong; the message says how.
    #[error("{0}")]
    Invalid(String),
    /// The user asked for the tree's help text.
    #[error("{0}")]
    Help(String),
}

type Build = dyn Fn(&[String]) -> Result<Arc<dyn Searcher>, BuildError> + Send + Sync;

struct Entry {
    about: String,
    build: Box<Build>,
    /// The tree's long options (without `--`): after the tree's name they are the tree's, even
    /// where `bts run` has an option of that name.
    options: Vec<String>,
}

/// The trees a program knows.
#[derive(Default)]
pub struct Registry {
    entries: BTreeMap<String, Entry>,
}

impl Registry {
    /// No trees.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-in trees: `uts`, `gw`, `queens`, `knapsack`, `maxclique`, `exec` (a program of yours, through the line
    /// protocol) and `lrs` (lrslib's lrs, a process per job).
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        r.register_parsed::<bts_adapters::ExecArgs>("exec", |a| {
            Ok(Arc::new(bts_adapters::ExecSearcher::new(a)?) as Arc<dyn Searcher>)
        });
        r.register_parsed::<bts_adapters::LrsArgs>("lrs", |a| {
            Ok(Arc::new(bts_adapters::LrsSearcher::new(a)?) as Arc<dyn Searcher>)
        });
        r.register::<bts_trees::UtsArgs, _>("uts", |a| bts_trees::Uts::new(a.params()?));
        r.register::<bts_trees::GwArgs, _>("gw", |a| Ok(a.build()));
        r.register::<bts_trees::QueensArgs, _>("queens", |a| Ok(a.build()));
        r.register_parsed::<bts_trees::KnapsackArgs>("knapsack", |a| a.searcher());
        r.register_parsed::<bts_trees::MaxCliqueArgs>("maxclique", |a| a.searcher());
        r
    }

    /// Registers a branch and bound ([`Optimise`]) whose options are parsed by clap into `A`, as
    /// [`register`](Self::register) does for a plain tree.
    pub fn register_optimising<A, T>(
        &mut self,
        name: &str,
        build: impl Fn(A) -> Result<T, String> + Send + Sync + 'static,
    ) where
        A: clap::Parser,
        T: Optimise,
    {
        self.register_parsed::<A>(name, move |args| {
            let tree = build(args)?;
            Ok(Arc::new(TreeSearcher::optimising(tree)) as Arc<dyn Searcher>)
        });
    }

    /// Registers a [`Tree`] whose options are parsed by clap into `A`, then turned into the tree by
    /// `build` (which may refuse them with a message).
    pub fn register<A, T>(&mut self, name: &str, build: impl Fn(A) -> Result<T, String> + Send + Sync + 'static)
    where
        A: clap::Parser,
        T: Tree,
    {
        self.register_parsed::<A>(name, move |args| {
            let tree = build(args)?;
            Ok(Arc::new(TreeSearcher::new(tree)) as Arc<dyn Searcher>)
        });
    }

    /// Registers a type-erased tree whose options are parsed by clap into `A`.
    ///
    /// A plain `#[derive(clap::Parser)]` will do: the tree's options come without a program name,
    /// and its help shows `bts run NAME [OPTIONS]`. Its description in `bts trees` is the struct's
    /// doc comment (or `about`).
    pub fn register_parsed<A: clap::Parser>(
        &mut self,
        name: &str,
        build: impl Fn(A) -> Result<Arc<dyn Searcher>, String> + Send + Sync + 'static,
    ) {
        let about = A::command().get_about().map_or_else(|| "(no description)".to_string(), |s| s.to_string());
        let options = A::command().get_arguments().filter_map(|a| a.get_long().map(String::from)).collect();
        let tree_name = name.to_string();
        self.register_entry(name, &about, options, move |args| {
            let command = A::command().no_binary_name(true).bin_name(format!("bts run {tree_name}"));
            let parsed = command.try_get_matches_from(args).and_then(|m| A::from_arg_matches(&m));
            let parsed = parsed.map_err(|e| match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    BuildError::Help(e.render().to_string())
                }
                _ => BuildError::Invalid(format!("{tree_name}: {}", one_line(&e))),
            })?;
            build(parsed).map_err(BuildError::Invalid)
        });
    }

    /// Registers a tree behind the type-erased [`Searcher`] interface (as legacy programs are).
    ///
    /// A name registered again replaces the earlier tree of that name, a built-in one too (as
    /// every `register` function does).
    pub fn register_searcher(
        &mut self,
        name: &str,
        about: &str,
        build: impl Fn(&[String]) -> Result<Arc<dyn Searcher>, BuildError> + Send + Sync + 'static,
    ) {
        self.register_entry(name, about, Vec::new(), build);
    }

    fn register_entry(
        &mut self,
        name: &str,
        about: &str,
        options: Vec<String>,
        build: impl Fn(&[String]) -> Result<Arc<dyn Searcher>, BuildError> + Send + Sync + 'static,
    ) {
        let entry = Entry { about: about.to_string(), build: Box::new(build), options };
        self.entries.insert(name.to_string(), entry);
    }

    /// The long options (without `--`) of the tree `name`, as far as the registry knows them.
    pub(crate) fn tree_options(&self, name: &str) -> &[String] {
        self.entries.get(name).map_or(&[], |e| &e.options)
    }

    /// Builds the tree `spec` names.
    pub fn build(&self, spec: &TreeSpec) -> Result<Arc<dyn Searcher>, BuildError> {
        match self.entries.get(&spec.name) {
            Some(entry) => (entry.build)(&spec.args),
            None => Err(BuildError::Unknown { name: spec.name.clone(), known: self.names().join(", ") }),
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    pub fn names(&self) -> Vec<&str> {
        self.entries.keys().map(String::as_str).collect()
    }

    /// One line per tree: name and description.
    pub fn describe(&self) -> String {
        let width = self.entries.keys().map(String::len).max().unwrap_or(0);
        self.entries.iter().map(|(name, e)| format!("  {name:width$}  {}\n", e.about)).collect()
    }
}

/// A clap error on one line: its message without clap's "error: " prefix, usage and hints.
pub(crate) fn one_line(error: &clap::Error) -> String {
    let text = error.render().to_string();
    let message = text.split("\n\nUsage:").next().unwrap_or(&text);
    let message = message.split("\n\nFor more information").next().unwrap_or(message);
    let words: Vec<&str> = message.split_whitespace().collect();
    words.join(" ").trim_start_matches("error: ").to_string()
}
