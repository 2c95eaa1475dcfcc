// Package browsertest starts a headless Chromium for a test and drives it
// with chromedp: the console's page is tested in a real browser, its
// script and its Content-Security-Policy as a person's browser runs them.
// It records every dialog the page opens and every exception its script
// throws, so a test can tell that no injected script ran.
package browsertest
