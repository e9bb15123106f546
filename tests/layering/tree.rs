//! The crate as the compiler sees it: the module tree (followed from `lib.rs` and `main.rs`
//! through `mod` declarations), which files are test-only, and every path the production
//! code names, resolved to the crate module it lands in.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// A module's path from the crate root (`["run", "trial"]`; empty for the root).
pub type ModPath = Vec<String>;

/// A path as the compiler resolves it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resolved {
    /// A path in the library crate, from its root (`crate::run::trial::X` → `run, trial, X`).
    Crate(Vec<String>),
    /// Anything else: another crate (`std::io::stdout`, `ratatui::…`), or a local name.
    Other(Vec<String>),
}

/// One source file of `src/`, placed in the module tree.
pub struct File {
    /// `src`-relative, `/`-separated (`run/trial/mod.rs`).
    pub rel: String,
    pub module: ModPath,
    /// `main.rs`: the root of the binary crate, which names the library as `primus_tune`.
    pub bin: bool,
    /// Declared under `#[cfg(test)]` (itself or a module above it).
    pub test_only: bool,
    pub ast: syn::File,
}

/// Something a file's production code names or does.
#[derive(Clone, Debug)]
pub struct Use {
    pub line: usize,
    pub what: Named,
}

#[derive(Clone, Debug)]
pub enum Named {
    /// A path: in a `use` tree, an expression, a type, a pattern, a macro's arguments.
    Path(Resolved),
    /// A macro invocation, by its last path segment (`println`).
    Macro(String),
    /// A string literal.
    Str(String),
}

pub struct Crate {
    pub files: Vec<File>,
    /// Every module (file or inline), production and test.
    pub modules: BTreeSet<ModPath>,
    /// The modules that are files.
    pub file_modules: BTreeSet<ModPath>,
    /// What each module re-exports (`pub use x::Y` in `app` → `Y` ↦ `app::x::Y`).
    reexports: BTreeMap<ModPath, BTreeMap<String, Resolved>>,
    /// Files that could not be read into the tree: parse errors, orphans, missing modules.
    pub problems: Vec<String>,
}

pub fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    // `#[cfg(test)]` or `#[cfg(all(test, …))]`; not `any(test, …)` nor `not(test)`.
    fn pred(m: &syn::Meta) -> bool {
        match m {
            syn::Meta::Path(p) => p.is_ident("test"),
            syn::Meta::List(l) if l.path.is_ident("all") => l
                .parse_args_with(
                    syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
                )
                .is_ok_and(|ms| ms.iter().any(pred)),
            _ => false,
        }
    }
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| pred(&m)))
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Parses a file; a thread remembers what it parsed (the injection test loads `src/` many
/// times, one file changed each time).
fn parse(rel: &str, text: &str) -> syn::Result<syn::File> {
    use std::hash::{Hash, Hasher};
    thread_local! {
        static PARSED: std::cell::RefCell<BTreeMap<(String, u64), syn::File>> =
            const { std::cell::RefCell::new(BTreeMap::new()) };
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    let key = (rel.to_string(), h.finish());
    if let Some(ast) = PARSED.with_borrow(|m| m.get(&key).cloned()) {
        return Ok(ast);
    }
    let ast = syn::parse_file(text)?;
    PARSED.with_borrow_mut(|m| m.insert(key, ast.clone()));
    Ok(ast)
}

fn parent_dir(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Where a file's `mod x;` declarations look for `x`: its own folder for `mod.rs`, the roots
/// and `#[path]` files; else a folder named after it.
fn child_dir(rel: &str, mod_rs: bool) -> String {
    if mod_rs {
        parent_dir(rel).to_string()
    } else {
        rel.strip_suffix(".rs").unwrap_or(rel).to_string()
    }
}

struct Pending {
    rel: String,
    module: ModPath,
    test_only: bool,
    mod_rs: bool,
}

impl Crate {
    /// Builds the tree from `src`-relative paths and their text.
    pub fn load(sources: &BTreeMap<String, String>) -> Crate {
        let mut c = Crate {
            files: Vec::new(),
            modules: BTreeSet::new(),
            file_modules: BTreeSet::new(),
            reexports: BTreeMap::new(),
            problems: Vec::new(),
        };
        let mut queue: Vec<Pending> = ["lib.rs", "main.rs"]
            .iter()
            .filter(|r| sources.contains_key(**r))
            .map(|r| Pending {
                rel: r.to_string(),
                module: Vec::new(),
                test_only: false,
                mod_rs: true,
            })
            .collect();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        c.modules.insert(Vec::new());
        c.file_modules.insert(Vec::new());
        while let Some(p) = queue.pop() {
            if let Some(&i) = seen.get(&p.rel) {
                // Declared twice (`tui` under two `cfg`s): test-only if both are.
                c.files[i].test_only &= p.test_only;
                continue;
            }
            let text = &sources[&p.rel];
            let ast = match parse(&p.rel, text) {
                Ok(ast) => ast,
                Err(e) => {
                    c.problems.push(format!("{}: does not parse: {e}", p.rel));
                    continue;
                }
            };
            let dir = child_dir(&p.rel, p.mod_rs);
            let mut found = Vec::new();
            declared_mods(&ast.items, &p, &dir, &p.module, p.test_only, &mut found);
            for (module, file, test_only, inline) in found {
                c.modules.insert(module.clone());
                if inline {
                    continue;
                }
                let Some((rel, mod_rs)) =
                    file.into_iter().find(|(rel, _)| sources.contains_key(rel))
                else {
                    c.problems.push(format!(
                        "{}: `mod {}` has no file",
                        p.rel,
                        module.join("::")
                    ));
                    continue;
                };
                c.file_modules.insert(module.clone());
                queue.push(Pending {
                    rel,
                    module,
                    test_only,
                    mod_rs,
                });
            }
            seen.insert(p.rel.clone(), c.files.len());
            c.files.push(File {
                bin: p.rel == "main.rs",
                rel: p.rel,
                module: p.module,
                test_only: p.test_only,
                ast,
            });
        }
        for rel in sources.keys() {
            if !seen.contains_key(rel) {
                c.problems
                    .push(format!("{rel}: no `mod` declaration reaches this file"));
            }
        }
        c.files.sort_by(|a, b| a.rel.cmp(&b.rel));
        c.collect_reexports();
        c
    }

    fn collect_reexports(&mut self) {
        let mut out = BTreeMap::new();
        for f in self.files.iter().filter(|f| !f.test_only && !f.bin) {
            let mut r = Resolver::new(self, f);
            r.reexports(&f.ast.items, &mut out);
        }
        self.reexports = out;
    }

    /// The module a crate path lands in, following re-exports (`crate::app::Session` →
    /// `app::session`): the longest prefix that is a module.
    pub fn module_of(&self, path: &[String]) -> ModPath {
        let mut path = path.to_vec();
        for _ in 0..8 {
            let n = (0..=path.len())
                .rev()
                .find(|&n| self.modules.contains(&path[..n]))
                .unwrap_or(0);
            let module = path[..n].to_vec();
            let next = path.get(n).and_then(|name| {
                self.reexports
                    .get(&module)
                    .and_then(|m| m.get(name))
                    .cloned()
            });
            match next {
                Some(Resolved::Crate(target)) => {
                    path = target.into_iter().chain(path[n + 1..].to_vec()).collect();
                }
                _ => return module,
            }
        }
        path
    }

    /// The file a module lives in (an inline module lives in its parent's file).
    pub fn file_module_of(&self, module: &[String]) -> ModPath {
        (0..=module.len())
            .rev()
            .map(|n| module[..n].to_vec())
            .find(|m| self.file_modules.contains(m))
            .unwrap_or_default()
    }

    /// Everything the production code of a (production) file names or does.
    pub fn uses(&self, f: &File) -> Vec<Use> {
        let mut r = Resolver::new(self, f);
        r.scopes.push(r.aliases(&f.ast.items));
        r.visit_items(&f.ast.items);
        r.out
    }
}

/// (module, candidate files with whether each is a `mod.rs`-like file, test-only, inline)
type Found = (ModPath, Vec<(String, bool)>, bool, bool);

/// The `mod` declarations in a file's items, inline modules' included, test ones marked.
fn declared_mods(
    items: &[syn::Item],
    p: &Pending,
    dir: &str,
    module: &ModPath,
    test_only: bool,
    out: &mut Vec<Found>,
) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        let name = m.ident.to_string();
        let child: ModPath = module.iter().cloned().chain([name.clone()]).collect();
        let test = test_only || is_cfg_test(&m.attrs);
        if let Some((_, inner)) = &m.content {
            out.push((child.clone(), Vec::new(), test, true));
            declared_mods(inner, p, &join(dir, &name), &child, test, out);
            continue;
        }
        let file = if let Some(path) = path_attr(&m.attrs) {
            vec![(join(parent_dir(&p.rel), &path), true)]
        } else {
            vec![
                (join(dir, &format!("{name}.rs")), false),
                (join(dir, &format!("{name}/mod.rs")), true),
            ]
        };
        out.push((child, file, test, false));
    }
}

/// Resolves paths as rustc does for a 2018+ edition crate, within one file.
struct Resolver<'a> {
    krate: &'a Crate,
    bin: bool,
    /// The module being visited (a file's, or an inline module inside it).
    module: ModPath,
    /// `use` aliases in scope, innermost last.
    scopes: Vec<BTreeMap<String, Resolved>>,
    out: Vec<Use>,
}

impl<'a> Resolver<'a> {
    fn new(krate: &'a Crate, f: &File) -> Self {
        Resolver {
            krate,
            bin: f.bin,
            module: f.module.clone(),
            scopes: Vec::new(),
            out: Vec::new(),
        }
    }

    fn resolve(&self, segs: &[String], leading_colon: bool, single_ok: bool) -> Option<Resolved> {
        let (first, rest) = segs.split_first()?;
        let with = |base: Vec<String>| base.into_iter().chain(rest.to_vec()).collect::<Vec<_>>();
        if leading_colon {
            return Some(Resolved::Other(segs.to_vec()));
        }
        match first.as_str() {
            "crate" | "$crate" | "self" if self.bin => None,
            "crate" | "$crate" => Some(Resolved::Crate(rest.to_vec())),
            "primus_tune" => Some(Resolved::Crate(rest.to_vec())),
            "self" => Some(Resolved::Crate(with(self.module.clone()))),
            "super" => {
                let mut base = self.module.clone();
                let mut i = 0;
                while segs.get(i).is_some_and(|s| s == "super") {
                    base.pop()?;
                    i += 1;
                }
                Some(Resolved::Crate(
                    base.into_iter().chain(segs[i..].to_vec()).collect(),
                ))
            }
            "Self" => None,
            _ => {
                if let Some(alias) = self.scopes.iter().rev().find_map(|s| s.get(first)) {
                    let mut full = match alias {
                        Resolved::Crate(p) | Resolved::Other(p) => p.clone(),
                    };
                    full.extend(rest.iter().cloned());
                    return Some(match alias {
                        Resolved::Crate(_) => Resolved::Crate(full),
                        Resolved::Other(_) => Resolved::Other(full),
                    });
                }
                let child: Vec<String> = self.module.iter().chain(segs).cloned().collect();
                if !self.bin
                    && (single_ok || !rest.is_empty())
                    && self.krate.modules.contains(&child[..=self.module.len()])
                {
                    return Some(Resolved::Crate(child));
                }
                Some(Resolved::Other(segs.to_vec()))
            }
        }
    }

    /// The leaves of a `use` tree: (alias, full path, is a glob).
    fn use_leaves(
        tree: &syn::UseTree,
        prefix: &mut Vec<String>,
        out: &mut Vec<(String, Vec<String>, bool)>,
    ) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                Self::use_leaves(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                if name == "self" {
                    let alias = prefix.last().cloned().unwrap_or_default();
                    out.push((alias, prefix.clone(), false));
                } else {
                    let mut full = prefix.clone();
                    full.push(name.clone());
                    out.push((name, full, false));
                }
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                if r.ident != "self" {
                    full.push(r.ident.to_string());
                }
                out.push((r.rename.to_string(), full, false));
            }
            syn::UseTree::Glob(_) => out.push((String::new(), prefix.clone(), true)),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    Self::use_leaves(t, prefix, out);
                }
            }
        }
    }

    fn resolve_use(&self, u: &syn::ItemUse) -> Vec<(String, Option<Resolved>, bool)> {
        let mut leaves = Vec::new();
        Self::use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
        leaves
            .into_iter()
            .map(|(alias, full, glob)| {
                let r = self.resolve(&full, u.leading_colon.is_some(), true);
                (alias, r, glob)
            })
            .collect()
    }

    /// The aliases the `use` items of one scope bring in (production items only).
    fn aliases(&self, items: &[syn::Item]) -> BTreeMap<String, Resolved> {
        let mut scope = BTreeMap::new();
        for item in items {
            if let syn::Item::Use(u) = item
                && !is_cfg_test(&u.attrs)
            {
                for (alias, r, glob) in self.resolve_use(u) {
                    if let (false, Some(r)) = (glob || alias == "_", r) {
                        scope.insert(alias, r);
                    }
                }
            }
        }
        scope
    }

    fn reexports(
        &mut self,
        items: &[syn::Item],
        out: &mut BTreeMap<ModPath, BTreeMap<String, Resolved>>,
    ) {
        self.scopes.push(self.aliases(items));
        for item in items {
            match item {
                syn::Item::Use(u)
                    if !is_cfg_test(&u.attrs) && !matches!(u.vis, syn::Visibility::Inherited) =>
                {
                    for (alias, r, glob) in self.resolve_use(u) {
                        if let (false, Some(r)) = (glob, r) {
                            out.entry(self.module.clone()).or_default().insert(alias, r);
                        }
                    }
                }
                syn::Item::Mod(m) if !is_cfg_test(&m.attrs) => {
                    if let Some((_, inner)) = &m.content {
                        self.module.push(m.ident.to_string());
                        self.reexports(inner, out);
                        self.module.pop();
                    }
                }
                _ => {}
            }
        }
        self.scopes.pop();
    }

    fn push(&mut self, line: usize, what: Named) {
        self.out.push(Use { line, what });
    }

    fn path(&mut self, line: usize, segs: &[String], leading_colon: bool, single_ok: bool) {
        if let Some(r) = self.resolve(segs, leading_colon, single_ok) {
            self.push(line, Named::Path(r));
        }
    }

    fn visit_items(&mut self, items: &[syn::Item]) {
        for i in items {
            self.visit_item(i);
        }
    }

    /// A macro's arguments: as expressions where they parse so (`println!("{}", x)`), else
    /// as tokens, where `a::b` sequences are paths and `name!` a macro.
    fn macro_tokens(&mut self, tokens: TokenStream) {
        use syn::parse::Parser;
        let exprs = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if let Ok(list) = exprs.parse2(tokens.clone()) {
            for e in &list {
                self.visit_expr(e);
            }
            return;
        }
        if let Ok(stmts) = syn::Block::parse_within.parse2(tokens.clone()) {
            for s in &stmts {
                self.visit_stmt(s);
            }
            return;
        }
        self.scan_tokens(tokens);
    }

    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let is_colons = |i: usize| {
            matches!((tts.get(i), tts.get(i + 1)),
                (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                    if a.as_char() == ':' && b.as_char() == ':')
        };
        let mut i = 0;
        while i < tts.len() {
            match &tts[i] {
                TokenTree::Group(g) => self.scan_tokens(g.stream()),
                TokenTree::Literal(l) => {
                    if let Ok(s) = syn::parse_str::<syn::LitStr>(&l.to_string()) {
                        self.push(l.span().start().line, Named::Str(s.value()));
                    }
                }
                TokenTree::Ident(id) => {
                    let line = id.span().start().line;
                    let dollar =
                        i > 0 && matches!(&tts[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                    let mut segs = vec![if dollar {
                        format!("${id}")
                    } else {
                        id.to_string()
                    }];
                    let leading = i >= 2 && !dollar && is_colons(i - 2);
                    while is_colons(i + 1) {
                        if let Some(TokenTree::Ident(next)) = tts.get(i + 3) {
                            segs.push(next.to_string());
                            i += 3;
                        } else {
                            break;
                        }
                    }
                    let bang =
                        matches!(tts.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '!');
                    if bang {
                        self.push(line, Named::Macro(segs.last().cloned().unwrap_or_default()));
                    }
                    if segs.len() > 1 || bang {
                        self.path(line, &segs, leading, false);
                    } else {
                        // a lone name: only through an alias (`stdout()` after `use std::io::stdout`)
                        self.path(line, &segs, false, false);
                    }
                }
                TokenTree::Punct(_) => {}
            }
            i += 1;
        }
    }
}

fn segments(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

impl<'ast> Visit<'ast> for Resolver<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match i {
            syn::Item::Const(x) => &x.attrs,
            syn::Item::Enum(x) => &x.attrs,
            syn::Item::ExternCrate(x) => &x.attrs,
            syn::Item::Fn(x) => &x.attrs,
            syn::Item::ForeignMod(x) => &x.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Macro(x) => &x.attrs,
            syn::Item::Mod(x) => &x.attrs,
            syn::Item::Static(x) => &x.attrs,
            syn::Item::Struct(x) => &x.attrs,
            syn::Item::Trait(x) => &x.attrs,
            syn::Item::TraitAlias(x) => &x.attrs,
            syn::Item::Type(x) => &x.attrs,
            syn::Item::Union(x) => &x.attrs,
            syn::Item::Use(x) => &x.attrs,
            _ => &[],
        };
        if is_cfg_test(attrs) {
            return;
        }
        match i {
            syn::Item::Mod(m) => {
                // A `mod x;` names no path; an inline module is a scope of its own.
                if let Some((_, items)) = &m.content {
                    self.module.push(m.ident.to_string());
                    let scope = self.aliases(items);
                    self.scopes.push(scope);
                    self.visit_items(items);
                    self.scopes.pop();
                    self.module.pop();
                }
            }
            syn::Item::Use(u) => {
                let line = u.use_token.span.start().line;
                for (_, r, _) in self.resolve_use(u) {
                    if let Some(r) = r {
                        self.push(line, Named::Path(r));
                    }
                }
            }
            _ => visit::visit_item(self, i),
        }
    }

    fn visit_impl_item(&mut self, i: &'ast syn::ImplItem) {
        let attrs: &[syn::Attribute] = match i {
            syn::ImplItem::Const(x) => &x.attrs,
            syn::ImplItem::Fn(x) => &x.attrs,
            syn::ImplItem::Type(x) => &x.attrs,
            syn::ImplItem::Macro(x) => &x.attrs,
            _ => &[],
        };
        if !is_cfg_test(attrs) {
            visit::visit_impl_item(self, i);
        }
    }

    fn visit_trait_item(&mut self, i: &'ast syn::TraitItem) {
        let attrs: &[syn::Attribute] = match i {
            syn::TraitItem::Const(x) => &x.attrs,
            syn::TraitItem::Fn(x) => &x.attrs,
            syn::TraitItem::Type(x) => &x.attrs,
            syn::TraitItem::Macro(x) => &x.attrs,
            _ => &[],
        };
        if !is_cfg_test(attrs) {
            visit::visit_trait_item(self, i);
        }
    }

    fn visit_block(&mut self, b: &'ast syn::Block) {
        let items: Vec<syn::Item> = b
            .stmts
            .iter()
            .filter_map(|s| match s {
                syn::Stmt::Item(i @ syn::Item::Use(_)) => Some(i.clone()),
                _ => None,
            })
            .collect();
        let scope = self.aliases(&items);
        self.scopes.push(scope);
        visit::visit_block(self, b);
        self.scopes.pop();
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.path(line, &segments(p), p.leading_colon.is_some(), false);
        visit::visit_path(self, p);
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(crate)`, `pub(super)`: a visibility, not a use.
    }

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {
        // `#[derive(…)]`, `#[serde(…)]`: names the code does not call.
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let line = m
            .path
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        let name = m
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        self.push(line, Named::Macro(name));
        self.visit_path(&m.path);
        self.macro_tokens(m.tokens.clone());
    }

    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        self.push(s.span().start().line, Named::Str(s.value()));
    }
}
