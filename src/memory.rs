//! How the process takes memory and gives it back. On a large repository a run reads tens of
//! MiB at a time (an index, a checkout's list of files, the list of every path for the brief)
//! and frees them again; what counts for the machine is the most it holds at once.

/// How much of the parsed objects (trees, commits) libgit2 keeps, all repositories together.
/// Its default (256 MiB) lets every tree of a large repository stay in memory once a status
/// or checkout has read it, in each repository handle that read it; agent-git reads most trees
/// once per step, and looks up the few it reads again through memos of its own.
const OBJECT_CACHE: usize = 1024 * 1024;

/// Blocks of at least this size are mapped and unmapped on their own, so that freeing one
/// gives it back at once. glibc's default starts here too but then rises to the largest block
/// freed so far (up to 32 MiB): an index read into one 8 MiB buffer and freed would leave every
/// later buffer of its size in the heap, where freed memory stays.
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// glibc's allocator pools: one per thread that allocates, up to eight per core, each keeping
/// what its threads freed. A run allocates little at a time in more than one thread; one more
/// pool than the main one lets the threads that do (the tree walks, the runtime's workers)
/// rarely wait for each other, and no more than that keep freed memory.
const ARENAS: i32 = 2;

/// Sets the process's memory policy: libgit2's object cache (`OBJECT_CACHE`) and the
/// allocator's (`MMAP_THRESHOLD`, `ARENAS`). Call it before any repository is opened and
/// before any thread starts.
pub fn tune() {
    let size = libc::ssize_t::try_from(OBJECT_CACHE).unwrap_or(libc::ssize_t::MAX);
    // SAFETY: libgit2's options are process-wide; this runs before any other thread uses them.
    // A failure leaves the default in place, which is only slower to give memory back.
    unsafe {
        let _ = git2::opts::set_cache_max_size(size);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes only the allocator's settings; a refusal leaves its default.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// Gives the pages the allocator holds free back to the system: for a thread that freed a
/// large repository's worth of small blocks (an index's entries, 10 MiB at 100,000 files) while
/// the run goes on. The allocator keeps what is freed between blocks still in use, for its
/// threads to use again, and returns only a free end of its pools: the pages would otherwise
/// stay the process's beside what the brief and the commits take next.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases pages of free blocks; blocks in use are untouched.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Held by a thread beside the run while it reads a whole index of a large repository (10 MiB
/// of entries at 100,000 files): the look at the user's checkout, and the pooled tree's
/// preparation. Both yield to the run; at once they held two indexes beside the brief.
static ONE_INDEX: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Waits until no other thread beside the run holds a whole index (`ONE_INDEX`).
pub fn one_index_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_INDEX
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
