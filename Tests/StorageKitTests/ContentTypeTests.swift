import Foundation
import Testing
@testable import StorageKit

/// Content-type inference: system mime.types first, then the built-in table.
@Suite struct ContentTypeTests {
    static let mimeTypes = """
    # a comment line
    image/x-test-jpeg\t\tjpg jpe   # trailing comment
    text/x-custom   cust CUST2
    application/vnd.first   dup
    application/vnd.second  dup
    application/no-extensions
    notatype   zzz

    """

    func withMimeTypesFile<T>(_ body: (String) throws -> T) throws -> T {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("mime-\(UUID().uuidString).types").path
        try Self.mimeTypes.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try body(path)
    }

    @Test func systemTableWinsOverBuiltIn() throws {
        try withMimeTypesFile { path in
            let table = ContentType.parseMimeTypes(atPath: path)
            #expect(ContentType.infer(forFileName: "photo.jpg", systemTable: table) == "image/x-test-jpeg")
            #expect(ContentType.infer(forFileName: "photo.JPE", systemTable: table) == "image/x-test-jpeg")
            #expect(ContentType.infer(forFileName: "a.cust", systemTable: table) == "text/x-custom")
            #expect(ContentType.infer(forFileName: "a.cust2", systemTable: table) == "text/x-custom")
            #expect(ContentType.infer(forFileName: "x.dup", systemTable: table) == "application/vnd.first")
            #expect(ContentType.infer(forFileName: "x.zzz", systemTable: table) == ContentType.fallback)
            // Not in the file: the built-in table answers.
            #expect(ContentType.infer(forFileName: "doc.pdf", systemTable: table) == "application/pdf")
            #expect(table.count == 5)
        }
    }

    @Test func missingFileIsAnEmptyTable() {
        #expect(ContentType.parseMimeTypes(atPath: "/nonexistent/mime.types").isEmpty)
    }

    @Test(arguments: [
        ("space.jpg", "image/jpeg"), ("SPACE.JPEG", "image/jpeg"), ("a.png", "image/png"), ("a.gif", "image/gif"),
        ("a.webp", "image/webp"), ("a.svg", "image/svg+xml"), ("a.pdf", "application/pdf"), ("a.txt", "text/plain"),
        ("index.html", "text/html"), ("index.htm", "text/html"), ("s.css", "text/css"), ("app.js", "text/javascript"),
        ("m.mjs", "text/javascript"), ("d.json", "application/json"), ("d.xml", "application/xml"),
        ("t.csv", "text/csv"), ("t.tsv", "text/tab-separated-values"), ("README.md", "text/markdown"),
        ("a.zip", "application/zip"), ("a.tar.gz", "application/gzip"), ("a.tgz", "application/gzip"),
        ("a.tar", "application/x-tar"), ("a.bz2", "application/x-bzip2"), ("a.xz", "application/x-xz"),
        ("a.7z", "application/x-7z-compressed"), ("song.mp3", "audio/mpeg"), ("clip.mp4", "video/mp4"),
        ("a.m4a", "audio/mp4"), ("a.wav", "audio/wav"), ("a.ogg", "audio/ogg"), ("a.webm", "video/webm"),
        ("a.mov", "video/quicktime"), ("a.avi", "video/x-msvideo"), ("a.mkv", "video/x-matroska"),
        ("favicon.ico", "image/vnd.microsoft.icon"), ("f.woff", "font/woff"), ("f.woff2", "font/woff2"),
        ("f.ttf", "font/ttf"), ("f.otf", "font/otf"), ("m.wasm", "application/wasm"), ("c.yaml", "application/yaml"),
        ("c.yml", "application/yaml"), ("c.toml", "application/toml"), ("x.py", "text/x-python"),
        ("x.swift", "text/x-swift"), ("x.c", "text/x-c"), ("x.h", "text/x-c"), ("x.go", "text/x-go"),
        ("x.rs", "text/x-rust"), ("x.sh", "application/x-sh"), ("x.doc", "application/msword"),
        ("x.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("x.xls", "application/vnd.ms-excel"),
        ("x.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
        ("x.ppt", "application/vnd.ms-powerpoint"),
        ("x.pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
        ("b.epub", "application/epub+zip"), ("p.heic", "image/heic"),
    ])
    func builtInTable(name: String, type: String) {
        #expect(ContentType.infer(forFileName: name, systemTable: [:]) == type)
    }

    @Test(arguments: ["noextension", ".bashrc", "trailingdot.", "dir.d/file", "x.unknownext", ""])
    func fallback(name: String) {
        #expect(ContentType.infer(forFileName: name, systemTable: [:]) == "application/octet-stream")
    }

    @Test func extensionOfTheLastComponentOnly() {
        #expect(ContentType.fileExtension("/tmp/dir.d/file.TXT") == "txt")
        #expect(ContentType.fileExtension("/tmp/dir.d/file") == nil)
        #expect(ContentType.fileExtension(".hidden.json") == "json")
    }

    @Test func builtInTableIsLarge() {
        #expect(ContentType.builtIn.count >= 60)
    }

    @Test func systemInferenceAlwaysAnswers() {
        // Whatever /etc/mime.types says here, a type comes back.
        #expect(ContentType.infer(forFileName: "a.png").hasPrefix("image/"))
        #expect(ContentType.infer(forFileName: "no-extension") == "application/octet-stream")
    }
}
