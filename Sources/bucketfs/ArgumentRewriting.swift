/// Makes the command lines of mount(8) and /etc/fstab look like ours:
/// mount.fuse3 runs `bucketfs BUCKET MOUNTPOINT -o opts` (no subcommand),
/// and bucketfs's own options may hide inside -o as name=value.
enum ArgumentRewriting {
    static let subcommands: Set<String> = ["mount", "unmount", "ls", "put", "get", "cp", "status", "help", "-h", "--help", "--version"]

    /// swift-argument-parser's own root flags, which must reach the root
    /// command: completion scripts (`--generate-completion-script bash`,
    /// also as `=bash`), the scripts' callback for completions, and the
    /// help dump the manual generator (generate-manual) reads.
    static let parserFlags = ["--generate-completion-script", "---completion", "--experimental-dump-help"]

    static func goesToRoot(_ argument: String) -> Bool {
        subcommands.contains(argument) || parserFlags.contains { argument == $0 || argument.hasPrefix($0 + "=") }
    }

    /// Long options of `mount` that take a value, and the flags.
    static let valueOptions: Set<String> = [
        "endpoint", "key-file", "token-file", "cache-dir", "cache-size", "read-ahead-budget", "stat-ttl",
        "negative-ttl", "uid", "gid", "file-mode", "dir-mode", "log-level", "log-file", "connect-timeout",
        "stall-timeout", "retry-attempts", "retry-max-time", "upload-chunk-size", "upload-retry-time",
        "recovery-retry-interval", "config", "kernel-read-ahead", "log-format", "metrics-address",
        "firebase-api-key", "firebase-email", "firebase-password-file", "firebase-refresh-token-file",
        "firebase-custom-token-file", "firebase-auth-emulator", "rename-copy-limit", "listing-stat-width",
        "impersonate-service-account", "iam-endpoint", "billing-project",
    ]
    static let flagOptions: Set<String> = [
        "anonymous", "read-only", "foreground", "allow-other", "retry-pending", "firebase-anonymous",
    ]

    /// `arguments` includes the program name at index 0; so does the result.
    static func rewrite(_ arguments: [String]) -> [String] {
        guard let program = arguments.first else { return arguments }
        var rest = Array(arguments.dropFirst())
        if let first = rest.first, !goesToRoot(first) { rest.insert("mount", at: 0) }
        guard rest.first == "mount" else { return [program] + rest }
        var rewritten: [String] = []
        var index = 0
        while index < rest.count {
            let argument = rest[index]
            if argument == "-o", index + 1 < rest.count {
                let sorted = MountOptionParsing.sort([rest[index + 1]], ownNames: valueOptions.union(flagOptions))
                for (name, value) in sorted.own {
                    rewritten.append("--\(name)")
                    if valueOptions.contains(name), let value { rewritten.append(value) }
                }
                let passOn = sorted.fuse + sorted.unknown
                if !passOn.isEmpty { rewritten += ["-o", passOn.joined(separator: ",")] }
                index += 2
            } else {
                rewritten.append(argument)
                index += 1
            }
        }
        return [program] + rewritten
    }
}
