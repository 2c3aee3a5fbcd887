//! `value_name!`: `Display` for a setting's enum as the word a pipeline file and the command
//! line write (`pad`, `skip`, `train`), never Rust's variant name (`Pad`, `Skip`, `Train`).

/// `value_name!(Type, ...)` implements `Display` for each `clap::ValueEnum` type by its
/// value name (the same `rename_all = "lowercase"` as its serde name).
macro_rules! value_name {
    ($($ty:ty),* $(,)?) => {
        $(
            impl std::fmt::Display for $ty {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    match clap::ValueEnum::to_possible_value(self) {
                        Some(v) => f.write_str(v.get_name()),
                        None => write!(f, "{self:?}"),
                    }
                }
            }
        )*
    };
}

value_name!(
    crate::error::OnError,
    crate::plan::Uneven,
    crate::source::Usage
);

#[cfg(test)]
mod tests {
    #[test]
    fn settings_show_as_written_in_a_pipeline_file() {
        assert_eq!(crate::Uneven::Pad.to_string(), "pad");
        assert_eq!(crate::OnError::Error.to_string(), "error");
        assert_eq!(crate::OnError::Skip.to_string(), "skip");
        assert_eq!(crate::source::Usage::All.to_string(), "all");
        assert_eq!(crate::source::Usage::Test.to_string(), "test");
    }
}
