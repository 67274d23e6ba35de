/// Client-chosen identifiers (device ids, request ids) are kept only when they are made of
/// `A-Z a-z 0-9 . _ : -`: harmless in a log line, a header or a URL path.
package enum SafeIdentifier {
    package static func isValid(_ text: String, length: ClosedRange<Int>) -> Bool {
        length.contains(text.utf8.count)
            && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x2E || byte == 0x5F || byte == 0x3A || byte == 0x2D
            }
    }
}
