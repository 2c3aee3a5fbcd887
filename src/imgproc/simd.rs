//! Runtime CPU dispatch for the hot kernels: the default target is baseline x86-64 (SSE2),
//! so the loops that need 32-bit integer multiplies or 8-wide float conversions are also
//! compiled for AVX2 and picked when the CPU has it. No FMA is enabled, so both versions
//! give the same bits.

/// `multiversion!(name, generic_fn, (args: types))` defines `fn name(args)` that runs
/// `generic_fn` compiled for AVX2 when the CPU supports it, and as is otherwise.
/// `generic_fn` should be `#[inline(always)]` so each copy is compiled for its target.
/// The generated functions are held to clippy's argument count like any others: where
/// a kernel needs many, group those that belong together in a `Copy` struct passed by
/// value (it inlines into each copy as its fields would).
macro_rules! multiversion {
    ($name:ident, $generic:path, ($($arg:ident: $ty:ty),*)) => {
        fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($arg: $ty),*) {
                    $generic($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2 (checked just above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            $generic($($arg),*)
        }
    };
}
