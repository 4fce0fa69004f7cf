/// The first word of the command line, checked before the parser sees it.
/// Without a subcommand the arguments are `mount`'s (mount(8) runs
/// `bucketfs gs://BUCKET MOUNTPOINT -o …`), so a mistyped subcommand such
/// as `lss gs://b` would otherwise be taken for a bucket and a mountpoint.
/// Here a first word must be a subcommand, an option or a URL; anything
/// else is a usage error that names the nearest subcommand.
enum FirstWord {
    /// The subcommands a user may type (`help` included), in help order.
    static var commands: [String] {
        BucketFS.configuration.subcommands.filter { $0.configuration.shouldDisplay }.map { $0.configuration.commandName ?? "" }
            + ["help"]
    }

    static func check(_ arguments: [String]) throws(CLIError) {
        guard let first = arguments.first, !first.hasPrefix("-") else { return }
        if first == "help" {
            try checkHelp(Array(arguments.dropFirst()))
            return
        }
        let all = BucketFS.configuration.subcommands.map { $0.configuration.commandName ?? "" }
        if all.contains(first) || first.contains("://") { return }
        if let meant = BucketURL.misspeltScheme(first) {
            throw CLIError.usage("\(first) is not a gs:// URL (did you mean \(meant)?)")
        }
        throw CLIError.usage("\(unknown(first)); to mount, give the bucket as gs://BUCKET (bucketfs gs://BUCKET MOUNTPOINT)")
    }

    /// `help [COMMAND]`: at most one name, and one that exists.
    private static func checkHelp(_ words: [String]) throws(CLIError) {
        let names = words.filter { !$0.hasPrefix("-") }
        guard names.count <= 1 else { throw CLIError.usage("help takes one command name, not \(names.joined(separator: " "))") }
        guard let name = names.first, !commands.contains(name) else { return }
        throw CLIError.usage(unknown(name))
    }

    private static func unknown(_ word: String) -> String {
        if let near = nearest(to: word) { return "no command \(word) (did you mean \(near)?)" }
        return "no command \(word) (the commands: \(commands.joined(separator: ", ")))"
    }

    /// The command closest to `word` by edit distance, if it is close
    /// enough to be a slip (at most two edits, and fewer than the word's
    /// length: `ab` is not a slip of `ls`).
    static func nearest(to word: String) -> String? {
        let scored = commands.map { (name: $0, distance: editDistance(word, $0)) }
        guard let best = scored.min(by: { $0.distance < $1.distance }),
              best.distance <= 2, best.distance < word.count else { return nil }
        return best.name
    }

    /// Levenshtein distance: insertions, deletions and substitutions.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
