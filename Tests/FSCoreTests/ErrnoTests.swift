import Foundation
import Synchronization
import Testing
@testable import FSCore

/// The one errno table (`ErrnoMapping.swift`): one test per row, a check
/// that the rows cover every (failure, operation) pair once, and a scan
/// that no other file of FSCore chooses an errno.
@Suite("errno mapping")
struct ErrnoTests {
    /// A row of `errno(for:during:)`: a failure, the operations it applies to, the errno.
    struct Row: Sendable, CustomTestStringConvertible {
        let error: StoreError
        let operations: [StoreOperation]
        let errno: Int32
        var testDescription: String { "\(error) during \(operations.map(\.rawValue).joined(separator: ",")) → \(errno)" }
    }

    static let all = StoreOperation.allCases
    static func all(but excluded: StoreOperation...) -> [StoreOperation] { all.filter { !excluded.contains($0) } }

    static let rows: [Row] = [
        Row(error: .notFound("x"), operations: all(but: .upload, .directoryRename), errno: ENOENT),
        Row(error: .notFound("x"), operations: [.upload], errno: EIO),
        Row(error: .notFound("x"), operations: [.directoryRename], errno: EIO),
        Row(error: .bucketNotFound("b"), operations: all, errno: EIO),
        Row(error: .preconditionFailed("p"), operations: all, errno: ESTALE),
        Row(error: .unauthenticated("u"), operations: all, errno: EACCES),
        Row(error: .permissionDenied("d"), operations: all, errno: EACCES),
        Row(error: .invalidArgument("i"), operations: [.upload], errno: EIO),
        Row(error: .invalidArgument("i"), operations: all(but: .upload), errno: EINVAL),
        Row(error: .unavailable("503"), operations: all, errno: EIO),
        Row(error: .quotaExceeded("429"), operations: [.upload], errno: EIO),
        Row(error: .quotaExceeded("429"), operations: all(but: .upload), errno: EAGAIN),
        Row(error: .cancelled, operations: all, errno: EINTR),
        Row(error: .other("?"), operations: all, errno: EIO),
    ]

    // Checks semantics.md#errno-eagain
    @Test(arguments: rows)
    func storeFailuresMapToErrno(row: Row) {
        for operation in row.operations {
            #expect(ErrnoMapping.errno(for: row.error, during: operation) == row.errno, "\(operation)")
            let fsError = FSError(row.error, during: operation, "stat bucket/x")
            #expect(fsError.errno == row.errno && fsError.message.contains("stat bucket/x") && fsError.message.contains(row.error.description))
        }
    }

    /// Every failure meets every operation in exactly one row, so the table
    /// above is the whole table.
    @Test func theRowsCoverEveryPairOnce() {
        let failures = Set(Self.rows.map { String(describing: $0.error).prefix { $0 != "(" } })
        #expect(failures.count == 10, "\(failures)")
        for failure in failures {
            let operations = Self.rows.filter { String(describing: $0.error).hasPrefix(failure) }.flatMap(\.operations)
            #expect(operations.sorted { $0.rawValue < $1.rawValue } == Self.all.sorted { $0.rawValue < $1.rawValue }, "\(failure)")
        }
    }

    @Test(arguments: [
        (Refusal.notFound, ENOENT), (.exists, EEXIST), (.isDirectory, EISDIR), (.notDirectory, ENOTDIR),
        (.notEmpty, ENOTEMPTY), (.nameTooLong, ENAMETOOLONG), (.invalid, EINVAL), (.badHandle, EBADF),
        (.notPermitted, EPERM), (.readOnly, EROFS), (.tooLarge, EFBIG), (.attributeTooLarge, E2BIG),
        (.crossDevice, EXDEV), (.noAttribute, ENODATA), (.notSupported, EOPNOTSUPP), (.stale, ESTALE),
        (.tryAgain, EAGAIN), (.ioError, EIO),
    ])
    func refusalsMapToErrno(refusal: Refusal, expected: Int32) {
        #expect(refusal.errno == expected)
        #expect(FSError(refusal, "why").errno == expected && FSError(refusal).is(refusal))
    }

    @Test func everyRefusalHasARow() {
        #expect(Refusal.allCases.count == 18)
    }

    /// A full disk or quota reaches the user as such; any other local
    /// failure is an I/O error.
    @Test(arguments: [(ENOSPC, ENOSPC), (EDQUOT, EDQUOT), (EBADF, EIO), (EFAULT, EIO), (EIO, EIO)])
    func localFailuresMapToErrno(code: Int32, expected: Int32) {
        #expect(ErrnoMapping.errno(forLocalFailure: code) == expected)
    }

    /// The upload row for a 429, end to end: past the retry window close
    /// reports EIO (the bytes are in the recovery folder), not EAGAIN.
    @Test func aQuotaFailurePastTheUploadWindowIsAnIOError() async throws {
        let cache = temporaryDirectory("quota")
        defer { removeDirectory(cache) }
        let h = try Harness(options: UploadRetryTests.options(cache, window: 0.3))
        h.store.setFaultHook { operation, _ in operation == .put ? .quotaExceeded("429 rate limit") : nil }
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "limited.txt", mode: 0o644, flags: O_WRONLY)
        _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: bytes(1000, seed: 9))
        await expectErrno(EIO) { try await h.fs.flush(entry.attributes.inode, handle: open.handle) }
        try await h.fs.release(entry.attributes.inode, handle: open.handle)
        #expect(RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t")).pending().map(\.entry.object) == ["limited.txt"])
    }
}

/// No file of FSCore but ErrnoMapping.swift names an errno: every errno
/// the core answers is chosen in that one table.
@Suite struct ErrnoScanTests {
    /// The FSCore sources, found from this file's path.
    static var sources: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/FSCore").path
    }

    /// Lines naming an errno as a value, with `file:line`. Comments are
    /// left out (they explain choices); string literals are not (an errno
    /// name inside one is no errno value, but none is needed there).
    static func errnoLiterals(in directory: String) throws -> [String] {
        let pattern = try Regex(#"\bE[A-Z0-9]{2,}\b"#)
        var found: [String] = []
        let files = try #require(FileManager.default.enumerator(atPath: directory)).compactMap { $0 as? String }
        for file in files.sorted() where file.hasSuffix(".swift") && file != "ErrnoMapping.swift" {
            let text = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                if code.contains(pattern) { found.append("\(file):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))") }
            }
        }
        return found
    }

    @Test func noErrnoIsChosenOutsideTheTable() throws {
        #expect(FileManager.default.fileExists(atPath: Self.sources + "/ErrnoMapping.swift"), "\(Self.sources)")
        let found = try Self.errnoLiterals(in: Self.sources)
        #expect(found.isEmpty, "errno literals outside ErrnoMapping.swift:\n\(found.joined(separator: "\n"))")
    }

    /// The scan finds what it looks for (so an empty result means something).
    @Test func theScanFindsAnErrnoLiteral() throws {
        let directory = temporaryDirectory("scan")
        defer { removeDirectory(directory) }
        try "let a = 1 // EIO in a comment\nthrow FSError(ENOENT, \"x\")\n".write(
            toFile: directory + "/Sample.swift", atomically: true, encoding: .utf8)
        #expect(try Self.errnoLiterals(in: directory) == [#"Sample.swift:2: throw FSError(ENOENT, "x")"#])
    }
}
