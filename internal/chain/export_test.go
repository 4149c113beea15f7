package chain

// SetCacheWritten makes r call f with each cache entry written under its
// temporary name, before the rename.
func SetCacheWritten(r *Runner, f func()) { r.cacheWritten = f }
