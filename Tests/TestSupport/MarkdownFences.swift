import Foundation

/// A fenced code block of a documentation page, as the tests that run the
/// documentation's examples read it. The info string after the opening
/// fence says what the block is (GitHub shows only its first word, the
/// language): `json config=/etc/bucketfs/photos.json` is a config file and
/// the path commands name it by; `sh synopsis` is a usage synopsis with
/// placeholders, not a command to run; `sh emulator` is run as written
/// against the emulator (docs/testing.md).
public struct MarkdownFence: Sendable {
    /// The page, relative to the repository (`docs/operations.md`).
    public let page: String
    /// The line of the opening fence, from 1.
    public let line: Int
    /// The info string's words; the language first.
    public let info: [String]
    /// The lines between the fences.
    public let body: [String]

    public var language: String { info.first ?? "" }
    /// "docs/operations.md:21", for messages.
    public var place: String { "\(page):\(line)" }

    public func has(_ word: String) -> Bool { info.dropFirst().contains(word) }

    /// The value of a `key=value` word of the info string.
    public func attribute(_ key: String) -> String? {
        info.dropFirst().first { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
    }

    /// README.md and every page of docs/, relative to the repository.
    public static func documentationPages(repository: String) throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: repository + "/docs")
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        return ["README.md"] + docs
    }

    /// Every fenced block of `page` (a fence is three or more backticks at
    /// the start of a line; it closes at a line of at least as many).
    public static func read(page: String, repository: String) throws -> [MarkdownFence] {
        let lines = try String(contentsOfFile: repository + "/" + page, encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var fences: [MarkdownFence] = []
        var open: (line: Int, ticks: Int, info: [String])?
        var body: [String] = []
        for (index, text) in lines.enumerated() {
            let ticks = text.prefix { $0 == "`" }.count
            if let current = open {
                if ticks >= current.ticks, text.dropFirst(ticks).allSatisfy(\.isWhitespace) {
                    fences.append(MarkdownFence(page: page, line: current.line, info: current.info, body: body))
                    open = nil
                } else {
                    body.append(text)
                }
            } else if ticks >= 3 {
                let info = text.dropFirst(ticks).split(separator: " ").map(String.init)
                open = (index + 1, ticks, info)
                body = []
            }
        }
        return fences
    }

    /// Every fenced block of README.md and docs/.
    public static func documentation(repository: String) throws -> [MarkdownFence] {
        try documentationPages(repository: repository).flatMap { try read(page: $0, repository: repository) }
    }
}
