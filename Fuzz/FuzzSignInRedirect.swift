import Foundation

// libFuzzer target: text -> SignInRedirect.check (a browser sign-in's rd). Oracle: whatever is
// accepted is printable ASCII without a backslash, as sent and (before its query) once decoded; a path accepted
// resolves, by Foundation's URL against the gateway's own origin, to that same host; an absolute
// URL accepted has an allowed origin or a host the route check accepts.
let base = URL(string: "https://gw.example.com/start")!
let allowed: Set<String> = ["https://app.example.com", "http://127.0.0.1:8080"]
let routeHosts: @Sendable (String) -> Bool = { $0 == "example.com" || $0.hasSuffix(".example.com") }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSignInRedirect(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let checked = try? SignInRedirect.check(text, allowedOrigins: allowed, acceptsHost: routeHosts) else { return 0 }
    let plain = { (byte: UInt8) in byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") }
    // Before the query (where the browser goes), also once decoded; the query's escapes are the target's own.
    let located = String(text.prefix { $0 != "?" && $0 != "#" })
    guard checked.target == text, text.utf8.allSatisfy(plain), (located.removingPercentEncoding ?? located).utf8.allSatisfy(plain) else {
        fatalError("an accepted return address holds a byte a browser may read otherwise")
    }
    if checked.isRelative {
        guard let resolved = URL(string: text, relativeTo: base)?.absoluteURL, resolved.host == base.host, resolved.scheme == "https" else {
            fatalError("an accepted return path resolves to another host")
        }
    } else {
        guard let origin = ReturnTarget.origin(of: text), let host = URL(string: text)?.host?.lowercased(), allowed.contains(origin) || routeHosts(host) else {
            fatalError("an accepted absolute return address is on a host nobody allowed")
        }
    }
    return 0
}
