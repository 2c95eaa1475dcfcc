package browsertest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// Browser is a headless Chromium of one test.
type Browser struct {
	browser context.Context

	mu         sync.Mutex
	dialogs    []string
	exceptions []string
}

// Start starts Chromium (Debian's chromium package), or ends t with
// testenv.Missing; it is stopped at cleanup.
func Start(t testing.TB) *Browser {
	t.Helper()
	path := testenv.Command(t, "chromium", "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.WindowSize(1280, 900),
		chromedp.Flag("lang", "en-US"))
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses to run as root.
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	// The first tab starts the browser; each Tab is a context of its own.
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return &Browser{browser: browser}
}

// Tab opens a tab in a browser context of its own (its own cookies), with
// a deadline for everything done in it; it is closed at cleanup.
func (b *Browser) Tab(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.browser, chromedp.WithNewBrowserContext(),
		chromedp.WithListener(func(ev any) {
			switch ev := ev.(type) {
			case *page.EventJavascriptDialogOpening:
				b.mu.Lock()
				b.dialogs = append(b.dialogs, string(ev.Type)+": "+ev.Message)
				b.mu.Unlock()
			case *runtime.EventExceptionThrown:
				d := ev.ExceptionDetails
				text := d.Text
				if d.Exception != nil {
					text += " " + d.Exception.Description
				}
				b.mu.Lock()
				b.exceptions = append(b.exceptions, text)
				b.mu.Unlock()
			}
		}))
	t.Cleanup(cancel)
	// A dialog would block the page; it is closed (and recorded above).
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
		}
	}()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	return ctx
}

// Dialogs are the dialogs (alert, confirm, prompt) a page opened.
func (b *Browser) Dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string{}, b.dialogs...)
}

// Exceptions are the exceptions a page's script threw and did not catch.
func (b *Browser) Exceptions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string{}, b.exceptions...)
}

// Do runs steps in tab, or fails t.
func Do(t testing.TB, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tab, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Eval evaluates expression in tab, or fails t.
func Eval[T any](t testing.TB, tab context.Context, expression string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expression))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expression, err)
	}
	return v
}

// WaitText waits until the text of an element sel matches holds want,
// and returns that text.
func WaitText(t testing.TB, tab context.Context, sel, want string) string {
	t.Helper()
	got, err := chromedp.Run(tab, chromedp.Poll[string](
		`(() => { for (const e of document.querySelectorAll(`+JSString(sel)+`)) if (e.textContent.includes(`+JSString(want)+`)) return e.textContent; return false; })()`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	if err != nil {
		all, _ := chromedp.Run(tab, chromedp.Evaluate[string](`[...document.querySelectorAll(`+JSString(sel)+`)].map(e => e.textContent).join(" | ")`))
		t.Fatalf("waiting for %q in %s: %v (it holds %q)", want, sel, err, all)
	}
	return got
}

// JSString quotes s as a JavaScript string literal.
func JSString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			fmt.Fprintf(&b, `\u{%x}`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
