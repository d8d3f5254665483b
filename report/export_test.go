package report

// PDFText is pdfText, for the tests outside the package (they read real
// scans through octdicom, which imports report).
var PDFText = pdfText

// BScanPNGForTest is bscanPNG, for the tests outside the package.
var BScanPNGForTest = bscanPNG
