// Typed wrappers for the libcurl calls Swift cannot import (variadic functions
// and macros). Each is a one-line static inline function: clang compiles them
// into the Swift module that imports CCurl, so no C target is needed.
// Only the Transport module imports CCurl.
#ifndef BUCKETFS_CCURL_SHIM_H
#define BUCKETFS_CCURL_SHIM_H

#include <curl/curl.h>

static inline CURLcode sc_easy_setopt_long(CURL *_Nonnull h, CURLoption o, long v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode sc_easy_setopt_off_t(CURL *_Nonnull h, CURLoption o, curl_off_t v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode sc_easy_setopt_string(CURL *_Nonnull h, CURLoption o, const char *_Nullable v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode sc_easy_setopt_pointer(CURL *_Nonnull h, CURLoption o, void *_Nullable v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode sc_easy_setopt_write_cb(CURL *_Nonnull h, CURLoption o, curl_write_callback _Nullable cb) {
    return curl_easy_setopt(h, o, cb);
}
static inline CURLcode sc_easy_setopt_read_cb(CURL *_Nonnull h, CURLoption o, curl_read_callback _Nullable cb) {
    return curl_easy_setopt(h, o, cb);
}
static inline CURLcode sc_easy_setopt_xferinfo_cb(CURL *_Nonnull h, curl_xferinfo_callback _Nullable cb) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cb);
}
static inline CURLcode sc_easy_getinfo_long(CURL *_Nonnull h, CURLINFO i, long *_Nonnull out) {
    return curl_easy_getinfo(h, i, out);
}
static inline CURLcode sc_easy_getinfo_off_t(CURL *_Nonnull h, CURLINFO i, curl_off_t *_Nonnull out) {
    return curl_easy_getinfo(h, i, out);
}
static inline CURLcode sc_easy_getinfo_pointer(CURL *_Nonnull h, CURLINFO i, void *_Nullable *_Nonnull out) {
    return curl_easy_getinfo(h, i, out);
}
static inline CURLMcode sc_multi_setopt_long(CURLM *_Nonnull m, CURLMoption o, long v) {
    return curl_multi_setopt(m, o, v);
}
/// The easy handle of a finished transfer, or NULL when the message is not CURLMSG_DONE.
static inline CURL *_Nullable sc_msg_done_handle(CURLMsg *_Nonnull msg) {
    return msg->msg == CURLMSG_DONE ? msg->easy_handle : NULL;
}
static inline CURLcode sc_msg_result(CURLMsg *_Nonnull msg) {
    return msg->data.result;
}
static inline const char *_Nonnull sc_version(void) {
    return curl_version_info(CURLVERSION_NOW)->version;
}

#endif
