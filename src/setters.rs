//! `setters!`: the chaining setters of a `#[non_exhaustive]` config struct, one per field, so
//! that code outside the crate builds configs as `Resize::new(256).filter(Filter::Bicubic)`
//! and a field added later breaks no caller.

/// `setters!(Type { field: T } optional { other: U })` writes `pub fn field(self, field: T)
/// -> Self` and `pub fn other(self, other: U) -> Self`, which stores `Some(other)` in an
/// `Option<U>` field.
macro_rules! setters {
    ($ty:ident { $($field:ident: $t:ty),* $(,)? } $(optional { $($opt:ident: $ot:ty),* $(,)? })?) => {
        impl $ty {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                pub fn $field(mut self, $field: $t) -> Self {
                    self.$field = $field;
                    self
                }
            )*
            $($(
                #[doc = concat!("Sets `", stringify!($opt), "` (to `Some`).")]
                pub fn $opt(mut self, $opt: $ot) -> Self {
                    self.$opt = Some($opt);
                    self
                }
            )*)?
        }
    };
}
