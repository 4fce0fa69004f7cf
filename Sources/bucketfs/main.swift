// Entry point; the commands live in other files (callbacks must never be
// defined here: top-level code in main.swift is @MainActor).
await BucketFS.run(arguments: Array(ArgumentRewriting.rewrite(CommandLine.arguments).dropFirst()))
