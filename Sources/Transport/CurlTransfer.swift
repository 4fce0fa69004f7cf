internal import CCurl
import Foundation
import Synchronization

/// One HTTP exchange on one curl easy handle.
///
/// Ownership and threads: created by `HTTPTransport` on a Swift task, then
/// handed to `CurlEngine`, whose single thread is the only one that touches
/// the easy handle, the reader and the response fields until `finish` resumes
/// the continuation. The engine keeps a strong reference while curl may call
/// back, which is what makes the unretained userdata pointers below sound.
final class CurlTransfer: @unchecked Sendable {
    let easy: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let reader: RequestBodyReader
    /// The body's growing file, if it has one (`GrowingFile`): the engine
    /// resumes the transfer when it grows and ends it if it waits too long.
    let growingFile: GrowingFile?
    private let sink: ResponseBodySink?
    private let uploadProgress: (@Sendable (Int64) -> Void)?
    private var lastReportedUpload: Int64 = -1

    private var status = 0
    private var headers = HTTPHeaders()
    private var body = Data()
    private(set) var bodyBytesDelivered: Int64 = 0
    private var sinkError: (any Error)?
    private var continuation: CheckedContinuation<HTTPResponse, any Error>?

    /// Set from any thread when the caller's task is cancelled.
    let cancelRequested = Atomic<Bool>(false)

    /// Error bodies are kept for diagnosis up to this size.
    private static let maxBufferedErrorBody = 4 << 20

    private let statistics: TransportStatistics
    /// Whether curl's time to first byte means the answer's: not for a
    /// method that sends a body (POST, PUT, PATCH), where libcurl (7.88)
    /// takes the body's first byte sent for the start of the transfer.
    private let timesAnswer: Bool

    init(
        request: HTTPRequest, sink: ResponseBodySink?, configuration: TransportConfiguration,
        statistics: TransportStatistics
    ) throws(TransportError) {
        guard let easy = curl_easy_init() else { throw .other(code: -1, message: "curl_easy_init failed") }
        self.easy = easy
        self.statistics = statistics
        self.reader = RequestBodyReader(request.body)
        self.growingFile = request.body.growingFile
        self.sink = sink
        self.uploadProgress = request.uploadProgress
        self.timesAnswer = [.get, .head, .delete].contains(request.method)
        configure(request, configuration)
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headerList)
    }

    func setContinuation(_ c: CheckedContinuation<HTTPResponse, any Error>) { continuation = c }

    private func configure(_ request: HTTPRequest, _ config: TransportConfiguration) {
        // Unretained: the engine holds this object for as long as curl can call back.
        let me = Unmanaged.passUnretained(self).toOpaque()
        sc_easy_setopt_string(easy, CURLOPT_URL, request.url)
        sc_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        sc_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
        sc_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        sc_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(config.connectTimeout.seconds * 1000))
        sc_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, config.stallSpeedLimit)
        sc_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, max(1, Int(config.stallTimeout.seconds.rounded(.up))))
        sc_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, 512 * 1024)
        sc_easy_setopt_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, 2 * 1024 * 1024)
        sc_easy_setopt_string(easy, CURLOPT_USERAGENT, config.userAgent)

        sc_easy_setopt_write_cb(easy, CURLOPT_WRITEFUNCTION, curlWriteCallback)
        sc_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, me)
        sc_easy_setopt_write_cb(easy, CURLOPT_HEADERFUNCTION, curlHeaderCallback)
        sc_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, me)

        let length = request.body.length
        switch request.method {
        case .get:
            break
        case .head:
            sc_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        case .post:
            sc_easy_setopt_long(easy, CURLOPT_POST, 1)
            // -1: the length is not known (a growing file); curl then
            // sends the body chunked, as the header below asks, on HTTP/1.1.
            sc_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, request.body.isOfUnknownLength ? -1 : curl_off_t(length))
            setReader(me)
        case .put, .patch:
            sc_easy_setopt_long(easy, CURLOPT_UPLOAD, 1)
            sc_easy_setopt_off_t(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(length))
            setReader(me)
            if request.method == .patch { sc_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, "PATCH") }
        case .delete:
            sc_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, "DELETE")
        }

        // "Expect: 100-continue" costs a round trip per upload and stalls
        // servers that never answer it; every other header is the caller's.
        var list = curl_slist_append(nil, "Expect:")
        if request.body.isOfUnknownLength { list = curl_slist_append(list, "Transfer-Encoding: chunked") }
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) {
            list = curl_slist_append(list, "\(name): \(value)")
        }
        headerList = list
        sc_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list))

        if uploadProgress != nil {
            sc_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0)
            sc_easy_setopt_xferinfo_cb(easy, curlProgressCallback)
            sc_easy_setopt_pointer(easy, CURLOPT_XFERINFODATA, me)
        }
    }

    private func setReader(_ me: UnsafeMutableRawPointer) {
        sc_easy_setopt_read_cb(easy, CURLOPT_READFUNCTION, curlReadCallback)
        sc_easy_setopt_pointer(easy, CURLOPT_READDATA, me)
    }

    // MARK: callbacks (transport thread)

    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if status == 0 {
            var code = 0
            sc_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
            status = code
        }
        if let sink, (200..<300).contains(status) {
            do {
                try sink(bytes)
            } catch {
                sinkError = error
                return false
            }
            bodyBytesDelivered += Int64(bytes.count)
        } else if body.count < Self.maxBufferedErrorBody || (200..<300).contains(status) {
            body.append(contentsOf: bytes)
        }
        return true
    }

    fileprivate func receiveHeader(_ line: String) {
        // Header lines are ASCII framing: trimmed without Foundation's
        // CharacterSet machinery (a dozen lines per response add up).
        let trimmed = Self.trimmedASCII(Substring(line))
        if trimmed.hasPrefix("HTTP/") {
            // A new response (after 100 Continue or a redirect) starts afresh.
            headers = HTTPHeaders()
            status = 0
            return
        }
        guard let colon = trimmed.firstIndex(of: ":") else { return }
        let name = String(trimmed[..<colon])
        let value = String(Self.trimmedASCII(trimmed[trimmed.index(after: colon)...]))
        headers[name] = value
    }

    /// `text` without leading and trailing spaces, tabs, CR and LF.
    static func trimmedASCII(_ text: Substring) -> Substring {
        func isSpace(_ c: Character) -> Bool { c == " " || c == "\t" || c == "\r" || c == "\n" || c == "\r\n" }
        var result = text
        while let first = result.first, isSpace(first) { result = result.dropFirst() }
        while let last = result.last, isSpace(last) { result = result.dropLast() }
        return result
    }

    fileprivate func readBody(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
        switch reader.read(into: buffer, capacity: capacity) {
        case .filled(let n): return n
        // The engine resumes the transfer when the growing file grows.
        case .wait: return Int(CURL_READFUNC_PAUSE)
        case .failed: return Int(CURL_READFUNC_ABORT)
        }
    }

    fileprivate func reportUpload(_ sent: Int64) {
        guard sent != lastReportedUpload else { return }
        lastReportedUpload = sent
        uploadProgress?(sent)
    }

    // MARK: completion (transport thread)

    /// Resumes the waiting task exactly once with the outcome of `code`.
    func finish(code: CURLcode) {
        guard let continuation else { return }
        self.continuation = nil
        var connects = 0
        sc_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        statistics.recordConnections(connects)
        if code == CURLE_OK {
            var final = 0
            sc_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &final)
            var response = HTTPResponse(status: final, headers: headers, body: body)
            response.timeToFirstByte = timeToFirstByte()
            continuation.resume(returning: response)
        } else {
            continuation.resume(throwing: error(for: code))
        }
    }

    /// From the request sent (CURLINFO_PRETRANSFER_TIME_T: after the
    /// connect, which a proxy in between answers itself) to the answer's
    /// first byte (CURLINFO_STARTTRANSFER_TIME_T), for a request without a
    /// body (`timesAnswer`).
    private func timeToFirstByte() -> Duration? {
        var pretransfer: curl_off_t = 0, firstByte: curl_off_t = 0
        guard timesAnswer, sc_easy_getinfo_off_t(easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer) == CURLE_OK,
              sc_easy_getinfo_off_t(easy, CURLINFO_STARTTRANSFER_TIME_T, &firstByte) == CURLE_OK,
              firstByte > 0, firstByte >= pretransfer else { return nil }
        return .microseconds(Int64(firstByte - pretransfer))
    }

    func finish(throwing error: TransportError) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(throwing: error)
    }

    private func error(for code: CURLcode) -> TransportError {
        let message = String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT:
            return .cannotConnect(message)
        case CURLE_OPERATION_TIMEDOUT:
            // A timeout before any connection existed is a connect timeout;
            // after, it is curl's low-speed limit: the transfer stalled.
            var localPort = 0
            sc_easy_getinfo_long(easy, CURLINFO_LOCAL_PORT, &localPort)
            return localPort == 0 ? .cannotConnect(message) : .stalled(message)
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE,
             CURLE_HTTP2, CURLE_HTTP2_STREAM,
             // A reused connection died while the body was being sent, and
             // curl could not rewind the body to resend it on a new one.
             CURLE_SEND_FAIL_REWIND:
            return .connectionLost(message, bodyBytesReceived: bodyBytesDelivered)
        case CURLE_WRITE_ERROR where sinkError != nil:
            return .sinkFailed(String(describing: sinkError!))
        case CURLE_ABORTED_BY_CALLBACK, CURLE_READ_ERROR:
            return .other(code: Int(code.rawValue), message: reader.failure ?? message)
        default:
            return .other(code: Int(code.rawValue), message: message)
        }
    }
}

// C trampolines: capture nothing, recover the transfer from userdata and
// forward at once. Userdata is the unretained CurlTransfer (see class note).

private let curlWriteCallback: curl_write_callback = { data, size, count, userdata in
    guard let userdata, let data else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    let n = size * count
    return transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: n)) ? n : 0
}

private let curlHeaderCallback: curl_write_callback = { data, size, count, userdata in
    guard let userdata, let data else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    let n = size * count
    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: n), as: UTF8.self)
    transfer.receiveHeader(line)
    return n
}

private let curlReadCallback: curl_read_callback = { buffer, size, count, userdata in
    guard let userdata, let buffer else { return Int(CURL_READFUNC_ABORT) }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.readBody(into: buffer, capacity: size * count)
}

private let curlProgressCallback: curl_xferinfo_callback = { userdata, _, _, _, uploaded in
    guard let userdata else { return 0 }
    Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue().reportUpload(Int64(uploaded))
    return 0
}
