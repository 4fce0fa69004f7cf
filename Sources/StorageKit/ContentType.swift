import Foundation

/// Infers a MIME type from a file name's extension, for uploads that give
/// no `contentType` (as Firebase's `putFile` does).
///
/// Order: the system's `/etc/mime.types` (what `file`, web servers and
/// `gsutil` consult on Linux, so users get the types their system knows),
/// then a built-in table of common types for systems without that file
/// (minimal containers), then `application/octet-stream`.
enum ContentType {
    static let fallback = "application/octet-stream"
    static let systemMimeTypesPath = "/etc/mime.types"

    /// The system table, read once on first use. A `static let` is
    /// initialised lazily and exactly once, thread-safely, by the runtime.
    static let system: [String: String] = parseMimeTypes(atPath: systemMimeTypesPath)

    /// The type for `fileName`'s extension (case-insensitive).
    static func infer(forFileName fileName: String) -> String {
        infer(forFileName: fileName, systemTable: system)
    }

    /// As `infer(forFileName:)`, with the system table given (for tests,
    /// or a table parsed from another mime.types with `parseMimeTypes`).
    static func infer(forFileName fileName: String, systemTable: [String: String]) -> String {
        guard let ext = fileExtension(fileName) else { return fallback }
        return systemTable[ext] ?? builtIn[ext] ?? fallback
    }

    /// The lowercased extension: what follows the last dot of the last path
    /// component. Hidden files without another dot (`.bashrc`) have none.
    static func fileExtension(_ fileName: String) -> String? {
        let base = fileName.split(separator: "/").last ?? ""
        guard let dot = base.lastIndex(of: "."), dot != base.startIndex else { return nil }
        let ext = base[base.index(after: dot)...]
        return ext.isEmpty ? nil : ext.lowercased()
    }

    /// Reads a mime.types file (`type ext1 ext2 …` per line, `#` comments).
    /// A missing or unreadable file is an empty table. When an extension is
    /// listed twice, the first line wins, as in Apache and nginx.
    static func parseMimeTypes(atPath path: String) -> [String: String] {
        guard let data = FileManager.default.contents(atPath: path) else { return [:] }
        return parseMimeTypes(String(decoding: data, as: UTF8.self))
    }

    static func parseMimeTypes(_ text: String) -> [String: String] {
        var table: [String: String] = [:]
        for line in text.split(whereSeparator: \.isNewline) {
            let content = line.prefix { $0 != "#" }
            let fields = content.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, fields[0].contains("/") else { continue }
            let type = String(fields[0])
            for ext in fields.dropFirst() {
                let key = ext.lowercased()
                if table[key] == nil { table[key] = type }
            }
        }
        return table
    }

    /// Common types, for systems without /etc/mime.types.
    static let builtIn: [String: String] = [
        // images
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif",
        "webp": "image/webp", "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon",
        "bmp": "image/bmp", "tif": "image/tiff", "tiff": "image/tiff", "heic": "image/heic",
        "heif": "image/heif", "avif": "image/avif",
        // documents and text
        "pdf": "application/pdf", "txt": "text/plain", "text": "text/plain", "log": "text/plain",
        "html": "text/html", "htm": "text/html", "css": "text/css", "csv": "text/csv",
        "tsv": "text/tab-separated-values", "md": "text/markdown", "markdown": "text/markdown",
        "xml": "application/xml", "json": "application/json", "yaml": "application/yaml",
        "yml": "application/yaml", "toml": "application/toml", "rtf": "application/rtf",
        "epub": "application/epub+zip",
        "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt": "application/vnd.oasis.opendocument.text",
        // code
        "js": "text/javascript", "mjs": "text/javascript", "wasm": "application/wasm",
        "py": "text/x-python", "swift": "text/x-swift", "c": "text/x-c", "h": "text/x-c",
        "cpp": "text/x-c++", "go": "text/x-go", "rs": "text/x-rust", "java": "text/x-java",
        "sh": "application/x-sh",
        // archives
        "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "tar": "application/x-tar", "bz2": "application/x-bzip2", "xz": "application/x-xz",
        "zst": "application/zstd", "7z": "application/x-7z-compressed",
        // audio and video
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "wav": "audio/wav", "ogg": "audio/ogg",
        "oga": "audio/ogg", "flac": "audio/flac", "aac": "audio/aac", "opus": "audio/opus",
        "mp4": "video/mp4", "m4v": "video/mp4", "webm": "video/webm", "mov": "video/quicktime",
        "avi": "video/x-msvideo", "mkv": "video/x-matroska", "ogv": "video/ogg",
        // fonts
        "woff": "font/woff", "woff2": "font/woff2", "ttf": "font/ttf", "otf": "font/otf",
    ]
}
