// FuseBridge: the only module that imports CFuse (libfuse3, low-level API).
//
// It translates, nothing more. A kernel request arrives on a libfuse worker
// thread in a capture-free C trampoline (Operations.swift), which copies
// the C arguments into Swift values and starts a Task that asks the
// `FileSystemOperations` core. The Task answers through a `Reply`
// (Reply.swift), a non-copyable value whose consuming methods are the only
// way to call fuse_reply_*, so every request is answered exactly once and a
// slow request never holds a libfuse thread. Extended attributes have their
// own file (ExtendedAttributeOperations.swift), which also answers foreign
// namespaces inline. Operations the core does not offer yet answer a
// deliberate errno from one table (UnsupportedOperations.swift). `FuseSession` (FuseSession.swift) owns the
// libfuse session: create, mount, loop, stop, close.
//
// Lifetimes: the session retains a `BridgeContext` (filesystem + logger)
// through an Unmanaged pointer that libfuse hands back as request userdata;
// it is released in `FuseSession.close()`, after the loop has returned and
// every in-flight reply Task has answered.
