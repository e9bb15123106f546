//! The import graph and its cycles (Tarjan's strongly connected components).

use std::collections::{BTreeMap, BTreeSet};

/// Edges `from → to`, each with the files that make it (for the message).
#[derive(Default)]
pub struct Graph {
    pub edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl Graph {
    pub fn add(&mut self, from: &str, to: &str, file: &str) {
        if from != to {
            self.edges
                .entry(from.to_string())
                .or_default()
                .entry(to.to_string())
                .or_default()
                .insert(file.to_string());
        }
    }

    pub fn has_edge(&self, from: &str, to: &str) -> bool {
        self.edges.get(from).is_some_and(|t| t.contains_key(to))
    }

    /// The cycles: each strongly connected component of more than one node, sorted.
    pub fn cycles(&self) -> Vec<Vec<String>> {
        let nodes: BTreeSet<&str> = self
            .edges
            .iter()
            .flat_map(|(f, ts)| std::iter::once(f.as_str()).chain(ts.keys().map(|t| t.as_str())))
            .collect();
        let mut t = Tarjan {
            g: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            next: 0,
            out: Vec::new(),
        };
        for n in nodes {
            if !t.index.contains_key(n) {
                t.connect(n);
            }
        }
        let mut out: Vec<Vec<String>> = t
            .out
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        out.sort();
        out
    }
}

struct Tarjan<'g> {
    g: &'g Graph,
    index: BTreeMap<&'g str, usize>,
    low: BTreeMap<&'g str, usize>,
    stack: Vec<&'g str>,
    on_stack: BTreeSet<&'g str>,
    next: usize,
    out: Vec<Vec<String>>,
}

impl<'g> Tarjan<'g> {
    fn connect(&mut self, v: &'g str) {
        self.index.insert(v, self.next);
        self.low.insert(v, self.next);
        self.next += 1;
        self.stack.push(v);
        self.on_stack.insert(v);
        let succ: Vec<&'g str> = self
            .g
            .edges
            .get(v)
            .map(|t| t.keys().map(|k| k.as_str()).collect())
            .unwrap_or_default();
        for w in succ {
            if !self.index.contains_key(w) {
                self.connect(w);
                let lw = self.low[w];
                let lv = self.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if self.on_stack.contains(w) {
                let iw = self.index[w];
                let lv = self.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if self.low[v] == self.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            self.out.push(comp);
        }
    }
}

/// The import graphs of the production code: between the top-level modules of `src/`
/// (`lib` and `main` for the roots), and between the files of `app/`.
pub fn imports(c: &crate::tree::Crate) -> (Graph, Graph) {
    use crate::tree::{Named, Resolved};
    let mut folders = Graph::default();
    let mut app = Graph::default();
    for f in c.files.iter().filter(|f| !f.test_only) {
        let from = crate::rules::layer(f);
        for u in c.uses(f) {
            let Named::Path(Resolved::Crate(p)) = &u.what else {
                continue;
            };
            let m = c.module_of(p);
            let to = m.first().cloned().unwrap_or_else(|| "lib".into());
            let at = format!("{}:{}", f.rel, u.line);
            folders.add(&from, &to, &at);
            if from == "app" && to == "app" {
                app.add(&f.module.join("::"), &c.file_module_of(&m).join("::"), &at);
            }
        }
    }
    (folders, app)
}
