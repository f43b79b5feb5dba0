//! Command-line options of the form `--name value` (repeatable) and `--flag`.

use std::collections::HashMap;

pub struct Options {
    values: HashMap<String, Vec<String>>,
}

impl Options {
    pub fn parse(argv: &[String], flags: &[&str], known: &[&str]) -> Result<Self, String> {
        let mut values: HashMap<String, Vec<String>> = HashMap::new();
        let mut rest = argv.iter();
        while let Some(option) = rest.next() {
            let name = option.strip_prefix("--").ok_or_else(|| format!("unexpected argument {option:?}"))?;
            if flags.contains(&name) {
                values.entry(name.to_owned()).or_default().push(String::new());
            } else if known.contains(&name) {
                let value = rest.next().ok_or_else(|| format!("--{name} needs a value"))?;
                values.entry(name.to_owned()).or_default().push(value.clone());
            } else {
                return Err(format!("unknown option --{name}"));
            }
        }
        Ok(Self { values })
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).and_then(|all| all.last()).map(String::as_str)
    }

    pub fn flag(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    pub fn required(&self, name: &str) -> Result<&str, String> {
        self.get(name).ok_or_else(|| format!("--{name} is required"))
    }

    pub fn parsed<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.get(name) {
            None => Ok(default),
            Some(text) => text.parse().map_err(|_| format!("--{name}: cannot read {text:?}")),
        }
    }
}
