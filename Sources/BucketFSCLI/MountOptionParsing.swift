/// Splits `-o a,b=c` style option strings the way mount(8) and
/// mount.fuse3 pass them, and sorts them into bucketfs's own options and
/// those that go to libfuse or are mount(8) bookkeeping.
enum MountOptionParsing {
    /// Options mount(8)/fstab pass along that mean nothing to a FUSE
    /// filesystem process (or that the kernel mount already applied).
    static let ignored: Set<String> = [
        "rw", "auto", "noauto", "user", "nouser", "users", "_netdev", "nofail", "defaults",
        "exec", "noexec", "suid", "nosuid", "dev", "nodev", "async", "sync", "atime", "noatime",
        "relatime", "x-systemd.automount",
    ]

    /// Options libfuse's session understands; passed through unchanged.
    static let fuseOptions: Set<String> = [
        "allow_other", "allow_root", "default_permissions", "auto_unmount", "ro", "debug",
        "fsname", "subtype", "max_read", "blkdev", "blksize", "kernel_cache", "auto_cache",
    ]

    struct Sorted: Equatable {
        /// bucketfs options as long-option names (with dashes) and values.
        var own: [(String, String?)] = []
        var fuse: [String] = []
        var unknown: [String] = []

        static func == (a: Sorted, b: Sorted) -> Bool {
            a.own.map { "\($0.0)=\($0.1 ?? "")" } == b.own.map { "\($0.0)=\($0.1 ?? "")" }
                && a.fuse == b.fuse && a.unknown == b.unknown
        }
    }

    /// `values` are the arguments of every `-o`; `ownNames` the long
    /// options bucketfs accepts (with dashes). `stat_ttl=5` and
    /// `stat-ttl=5` both name `--stat-ttl 5`.
    static func sort(_ values: [String], ownNames: Set<String>) -> Sorted {
        var sorted = Sorted()
        for option in values.flatMap({ $0.split(separator: ",").map(String.init) }) where !option.isEmpty {
            let parts = option.split(separator: "=", maxSplits: 1).map(String.init)
            let key = parts[0]
            let dashed = key.replacingOccurrences(of: "_", with: "-")
            if ownNames.contains(dashed) {
                sorted.own.append((dashed, parts.count > 1 ? parts[1] : nil))
            } else if fuseOptions.contains(key) {
                sorted.fuse.append(option)
            } else if ignored.contains(key) || key.hasPrefix("x-") || key.hasPrefix("comment=") {
                continue
            } else {
                sorted.unknown.append(option)
            }
        }
        return sorted
    }
}
