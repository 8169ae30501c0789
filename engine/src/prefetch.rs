//! Cache prefetch hints: ask the processor to start loading a line the next command will
//! read, while the current one runs. A hint reads nothing the program sees and cannot fault;
//! on targets without one it does nothing.

/// Starts loading the cache line holding `item` into every level of the cache.
#[inline(always)]
pub(crate) fn prefetch<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE, which `_mm_prefetch` needs, is part of every x86_64 processor, and a
        // prefetch of any address is only a hint: it dereferences nothing and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((item as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}
