package sifen

// CheckMessageBytes exposes checkMessageBytes to the tests of the size
// boundary, which no ZIP length reaches exactly (base64 grows by 4).
var CheckMessageBytes = checkMessageBytes
