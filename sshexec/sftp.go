package sshexec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// DownloadRequest is one file to read from a target over SFTP.
type DownloadRequest struct {
	// Path is the remote file; a relative path is relative to the login
	// directory. It is resolved by the server (symlinks followed) before
	// anything is read.
	Path string
	// Check is called with the resolved path before the file is opened;
	// an error from it refuses the download and is returned as is. nil
	// allows every path.
	Check func(realPath string) error
	// MaxBytes is the number of bytes after which the download stops, with
	// what arrived kept and TransferResult.Truncated set; zero means no
	// limit.
	MaxBytes int64
	// W receives the file's bytes; nil discards them (the result still
	// counts and hashes them).
	W io.Writer
}

// UploadRequest is one file to write on a target over SFTP.
type UploadRequest struct {
	// Path is the remote destination; a relative path is relative to the
	// login directory. Its directory is resolved by the server (symlinks
	// followed); the destination itself must not be a symlink.
	Path string
	// Check is called with the resolved destination (the resolved
	// directory joined with the base name) before anything is written; an
	// error from it refuses the upload and is returned as is. nil allows
	// every path.
	Check func(realPath string) error
	// R is read until end of file for the file's content; nil is an empty
	// file.
	R io.Reader
	// Size is the number of bytes R holds; -1 means unknown. A known size
	// above MaxBytes is refused before anything is sent, and R holding
	// another number of bytes fails the upload.
	Size int64
	// Mode holds the file's permission bits; zero means 0644.
	Mode os.FileMode
	// Overwrite allows replacing an existing regular file; false refuses
	// one with an *ExistsError.
	Overwrite bool
	// MaxBytes is the largest upload allowed; R holding more fails the
	// upload with a *TooLargeError, the destination untouched. Zero means
	// no limit.
	MaxBytes int64
}

// TransferResult is the outcome of a download or upload.
type TransferResult struct {
	// Path is the remote file's resolved path.
	Path string
	// Size, Mode and ModTime are the remote file's, as the server reported
	// them: before reading for a download, after renaming for an upload.
	Size    int64
	Mode    os.FileMode
	ModTime time.Time
	// Bytes is how many bytes moved, and SHA256 their hash (hex).
	Bytes  int64
	SHA256 string
	// Truncated is set when a download stopped at its MaxBytes: the file
	// holds more than Bytes.
	Truncated bool
	Duration  time.Duration
}

// ErrNoSFTP is returned when the server refuses the SFTP subsystem.
var ErrNoSFTP = errors.New("the server offers no SFTP subsystem (sshd_config: Subsystem sftp internal-sftp)")

// PathError refuses a transfer path before anything is moved, for a reason
// that is not the caller's policy (that error comes from Check as is).
type PathError struct {
	Path   string
	Reason string
}

func (e *PathError) Error() string { return fmt.Sprintf("path %q refused: %s", e.Path, e.Reason) }

// ExistsError refuses an upload over an existing file without Overwrite.
type ExistsError struct{ Path string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("%s exists; upload with overwrite to replace it", e.Path)
}

// TooLargeError fails an upload whose content exceeds its MaxBytes; the
// destination is untouched.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the upload is larger than its limit of %d bytes; nothing was written", e.Limit)
}

// A transfer keeps sftpConcurrency requests of 32 KiB in flight, as
// OpenSSH's sftp client does (-B 32768 -R 64). A server that offers
// limits@openssh.com is OpenSSH's (8.6 and later), which takes requests of
// up to 256 KiB: then sftpWideConcurrency requests of sftpWidePacket, the
// same 2 MiB in flight in fewer, larger packets. On the test sshd that
// took 1 GiB from 0.86-1.07 of OpenSSH's sftp to 1.09-1.19 (upload and
// download, BenchmarkSFTPUpload and BenchmarkSFTPDownload).
const (
	sftpConcurrency     = 64
	sftpWidePacket      = 128 << 10
	sftpWideConcurrency = 16
)

// sftpSession is the SFTP client on a lease's session channel.
type sftpSession struct {
	l       *Lease
	c       *sftp.Client
	stop    func() // stops the guard
	readers sync.WaitGroup
	// concurrency is how many requests a transfer keeps in flight.
	concurrency int
}

// startSFTP starts the SFTP subsystem on the leased session. Once ctx has
// ended, and grace has passed since, the channel is closed, which fails
// every call still waiting on a stalled server: grace is what cleanup after
// a cancel gets. The session must be ended with end, which also releases
// the lease.
func (l *Lease) startSFTP(ctx context.Context, grace time.Duration) (*sftpSession, error) {
	if !l.take() {
		return nil, errLeaseUsed
	}
	if l.target.Auth.CA != nil {
		command := l.target.SFTPCommand
		if command == "" {
			command = "internal-sftp"
		}
		if err := l.certify(ctx, command, false); err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, err
		}
	}
	s := &sftpSession{l: l, concurrency: sftpConcurrency}
	s.readers.Add(2)
	go func() { defer s.readers.Done(); ssh.DiscardRequests(l.reqs) }()
	go func() { defer s.readers.Done(); io.Copy(io.Discard, l.ch.Stderr()) }()
	s.stop = guard(ctx, grace, func() { s.closeAndWait(func() { l.ch.Close() }) })
	ok, err := l.ch.SendRequest("subsystem", true, ssh.Marshal(&struct{ Name string }{"sftp"}))
	if err == nil && !ok {
		err = ErrNoSFTP
	}
	if err == nil {
		s.c, err = sftp.NewClientPipe(l.ch, l.ch, sftp.UseFstat(true), sftp.MaxConcurrentRequestsPerFile(sftpConcurrency))
	}
	if err == nil {
		if _, ok := s.c.HasExtension("limits@openssh.com"); ok {
			// Options are set before the first request; nothing reads
			// them concurrently.
			s.concurrency = sftpWideConcurrency
			err = errors.Join(sftp.MaxPacketUnchecked(sftpWidePacket)(s.c), sftp.MaxConcurrentRequestsPerFile(s.concurrency)(s.c))
		}
	}
	if err != nil {
		s.end()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("target %q: start sftp: %w", l.target.Name, err)
	}
	return s, nil
}

// end closes the SFTP session's channel, waits for its readers, and
// releases the lease's session slot.
func (s *sftpSession) end() {
	s.stop()
	s.closeAndWait(func() {
		if s.c != nil {
			s.c.Close() // waits for the client's reader too
		} else {
			s.l.ch.Close()
		}
	})
	s.l.conn.release()
}

// closeAndWait calls closeFn, which closes the session's channel, and
// waits for the readers, which end once the server closes the channel in
// turn. A server that has not within the keepalive interval has the
// connection closed, as a command that did not stop does: its sftp-server
// may be stuck in a call that never returns (an open of a named pipe waits
// for a writer), and then the readers, and every SFTP call waiting for a
// reply, would wait forever.
func (s *sftpSession) closeAndWait(closeFn func()) {
	d := s.l.target.keepalive()
	t := time.AfterFunc(d, func() {
		s.l.conn.close(fmt.Errorf("the server did not close an SFTP session within %v of its end", d))
	})
	defer t.Stop()
	closeFn()
	s.readers.Wait()
}

// guard calls closeFn once ctx has ended and grace has passed since, unless
// the returned stop is called first. stop waits for a closeFn that began.
func guard(ctx context.Context, grace time.Duration, closeFn func()) (stop func()) {
	var mu sync.Mutex
	var running sync.WaitGroup
	stopped := false
	var timer *time.Timer
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			running.Add(1)
			timer = time.AfterFunc(grace, func() { defer running.Done(); closeFn() })
		}
	})
	return func() {
		stopAfter()
		mu.Lock()
		stopped = true
		if timer != nil && timer.Stop() {
			running.Done() // it will not run
		}
		mu.Unlock()
		running.Wait()
	}
}

// checkPath refuses a path that must not be sent: empty, or holding a NUL
// byte (which the SFTP server would cut the path at).
func checkPath(p string) error {
	switch {
	case p == "":
		return &PathError{Path: p, Reason: "the path is empty"}
	case strings.IndexByte(p, 0) >= 0:
		return &PathError{Path: p, Reason: "it contains a NUL byte"}
	}
	return nil
}

// stillResolves refuses real, a path the server resolved before a file on
// it was opened or created, when it no longer resolves to itself: the file
// or a directory on the way was replaced by a symbolic link meanwhile, and
// the open may have followed it out of the path that was checked. SFTP has
// no open that refuses links, so this is asked after the open, before a
// byte moves: a racer on the host must swap a link in and out again
// between two requests, not just once, to be read or written through.
func (s *sftpSession) stillResolves(ctx context.Context, real string) error {
	now, err := s.c.RealPath(real)
	switch {
	case err != nil:
		return s.failed(ctx, "resolve "+real+" again", err)
	case now != real:
		return &PathError{Path: real, Reason: "it was replaced by a symbolic link while it was opened (it now resolves elsewhere); nothing was moved"}
	}
	return nil
}

// fileKind names the type of a file that is not a regular one.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// failed maps an error of a step: ctx's cause when ctx has ended (the step
// failed because the transfer was stopped), else err in context.
func (s *sftpSession) failed(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("target %q: %s: %w", s.l.target.Name, step, err)
}

// Download reads req.Path into req.W over SFTP on the leased session, and
// releases the lease when it returns. It resolves the path on the server,
// calls req.Check with the resolved path, and refuses what is not a regular
// file, or a path that resolves elsewhere once the file is open (a
// *PathError; see stillResolves). When ctx ends, Download returns the
// result so far with ctx's cause; when req.W fails, with that error. An
// error without a result means nothing was read: ErrNoSFTP, a *PathError,
// Check's error, or a failure of the server (errors.Is(err,
// fs.ErrNotExist) for a missing file).
//
// The file is read with concurrent requests, as OpenSSH's sftp client
// does. A server that stalls holds the download until ctx ends, and one
// keepalive interval more if it does not close the session then (the
// connection is closed instead; see closeAndWait).
func (l *Lease) Download(ctx context.Context, req DownloadRequest) (*TransferResult, error) {
	start := time.Now()
	if err := checkPath(req.Path); err != nil {
		l.Release()
		return nil, err
	}
	// Nothing to clean up after a cancel: the channel closes at once.
	s, err := l.startSFTP(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer s.end()
	real, err := s.c.RealPath(req.Path)
	if err != nil {
		return nil, s.failed(ctx, "resolve "+req.Path, err)
	}
	if req.Check != nil {
		if err := req.Check(real); err != nil {
			return nil, err
		}
	}
	fi, err := s.c.Stat(real)
	if err != nil {
		return nil, s.failed(ctx, "stat "+real, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &PathError{Path: real, Reason: "it is " + fileKind(fi.Mode()) + ", not a regular file"}
	}
	f, err := s.c.Open(real)
	if err != nil {
		return nil, s.failed(ctx, "open "+real, err)
	}
	defer f.Close()
	if err := s.stillResolves(ctx, real); err != nil {
		return nil, err
	}
	res := &TransferResult{Path: real, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
	m := &downMeter{ctx: ctx, w: req.W, limit: req.MaxBytes, h: sha256.New()}
	_, err = f.WriteTo(m)
	res.Bytes, res.SHA256, res.Truncated = m.n, hex.EncodeToString(m.h.Sum(nil)), m.truncated
	res.Duration = time.Since(start)
	switch {
	case m.truncated:
		return res, nil
	case m.werr != nil:
		return res, fmt.Errorf("write the download of %s: %w", real, m.werr)
	case err != nil:
		return res, s.failed(ctx, "read "+real, err)
	}
	return res, nil
}

// errTruncated stops File.WriteTo at MaxBytes.
var errTruncated = errors.New("download limit reached")

// downMeter counts and hashes a download into its writer, and stops it at
// its limit or when ctx ends.
type downMeter struct {
	ctx       context.Context
	w         io.Writer
	h         hash.Hash
	n, limit  int64
	truncated bool
	werr      error
}

func (m *downMeter) Write(p []byte) (int, error) {
	if err := m.ctx.Err(); err != nil {
		return 0, err
	}
	keep := p
	if m.limit > 0 && m.n+int64(len(p)) > m.limit {
		keep, m.truncated = p[:m.limit-m.n], true
	}
	if m.w != nil && len(keep) > 0 {
		n, err := m.w.Write(keep)
		m.h.Write(keep[:n])
		m.n += int64(n)
		if err != nil {
			m.werr, m.truncated = err, false
			return n, err
		}
	} else {
		m.h.Write(keep)
		m.n += int64(len(keep))
	}
	if m.truncated {
		return len(keep), errTruncated
	}
	return len(p), nil
}

// Upload writes req.R to req.Path over SFTP on the leased session, and
// releases the lease when it returns. It resolves the destination's
// directory on the server, calls req.Check with the resolved destination,
// and refuses a destination that is a symlink or not a regular file, or
// whose directory resolves elsewhere once the temporary file is created (a
// *PathError; see stillResolves), or that exists without req.Overwrite (an
// *ExistsError). The content goes to a temporary file in the same
// directory (".<base>.actiongw-<random>.tmp"), which is synced where the
// server supports fsync@openssh.com, given its mode, and renamed over the
// destination: the destination is never half-written. With Overwrite the
// rename is atomic where the server supports posix-rename@openssh.com;
// elsewhere the old file is removed first, so the destination is missing
// for a moment.
//
// When ctx ends, the content exceeds MaxBytes (a *TooLargeError) or a
// write fails, the temporary file is removed, with up to the target's
// keepalive interval after ctx's end to do it, and Upload returns the
// result so far with the error (ctx's cause for a cancel). An error
// without a result means nothing was written.
func (l *Lease) Upload(ctx context.Context, req UploadRequest) (*TransferResult, error) {
	start := time.Now()
	if err := checkPath(req.Path); err != nil {
		l.Release()
		return nil, err
	}
	if req.MaxBytes > 0 && req.Size > req.MaxBytes {
		l.Release()
		return nil, &TooLargeError{Limit: req.MaxBytes}
	}
	dir, base := path.Split(req.Path)
	if base == "" || base == "." || base == ".." {
		l.Release()
		return nil, &PathError{Path: req.Path, Reason: "it names no file; give the file's full path"}
	}
	if dir == "" {
		dir = "."
	}
	s, err := l.startSFTP(ctx, l.target.keepalive())
	if err != nil {
		return nil, err
	}
	defer s.end()
	realDir, err := s.c.RealPath(dir)
	if err != nil {
		return nil, s.failed(ctx, "resolve "+dir, err)
	}
	dest := path.Join(realDir, base)
	if req.Check != nil {
		if err := req.Check(dest); err != nil {
			return nil, err
		}
	}
	if err := s.checkDest(ctx, dest, req.Overwrite); err != nil {
		return nil, err
	}
	res := &TransferResult{Path: dest}
	tmp := path.Join(realDir, "."+base+".actiongw-"+newRunID()+".tmp")
	m, err := s.write(ctx, tmp, req)
	if m != nil {
		res.Bytes, res.SHA256 = m.n, hex.EncodeToString(m.h.Sum(nil))
	}
	if err == nil {
		err = s.rename(ctx, tmp, dest, req.Overwrite)
	}
	if err != nil {
		if m == nil {
			return nil, err // no temporary file
		}
		res.Duration = time.Since(start)
		return res, s.removeTemp(tmp, err)
	}
	if fi, err := s.c.Lstat(dest); err == nil {
		res.Size, res.Mode, res.ModTime = fi.Size(), fi.Mode(), fi.ModTime()
	}
	res.Duration = time.Since(start)
	return res, nil
}

// checkDest refuses an upload destination that is a symlink or not a
// regular file, or that exists without overwrite.
func (s *sftpSession) checkDest(ctx context.Context, dest string, overwrite bool) error {
	fi, err := s.c.Lstat(dest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return s.failed(ctx, "stat "+dest, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		// Renaming would replace the link, not the file it points to.
		return &PathError{Path: dest, Reason: "it is a symbolic link; upload to the path it points to"}
	case !fi.Mode().IsRegular():
		return &PathError{Path: dest, Reason: "it is " + fileKind(fi.Mode()) + ", not a regular file to replace"}
	case !overwrite:
		return &ExistsError{Path: dest}
	}
	return nil
}

// write creates tmp, which must not exist, and writes req.R into it with
// its mode, synced where the server can. The meter is nil when tmp was not
// created.
func (s *sftpSession) write(ctx context.Context, tmp string, req UploadRequest) (*upMeter, error) {
	f, err := s.c.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, s.failed(ctx, "create a temporary file in "+path.Dir(tmp), err)
	}
	m := &upMeter{ctx: ctx, r: req.R, limit: req.MaxBytes, h: sha256.New()}
	if m.r == nil {
		m.r = strings.NewReader("")
	}
	err = s.stillResolves(ctx, path.Dir(tmp))
	if err == nil {
		err = s.fill(ctx, f, m, req)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = s.failed(ctx, "close "+tmp, cerr)
	}
	return m, err
}

func (s *sftpSession) fill(ctx context.Context, f *sftp.File, m *upMeter, req UploadRequest) error {
	// Private until complete: the final mode may be wider than the
	// content's readers should see half-written.
	if err := f.Chmod(0o600); err != nil {
		return s.failed(ctx, "chmod the temporary file", err)
	}
	if _, err := f.ReadFromWithConcurrency(m, s.concurrency); err != nil {
		switch {
		case m.err != nil:
			return m.err
		case ctx.Err() != nil:
			return context.Cause(ctx)
		}
		return s.failed(ctx, "write", err)
	}
	if req.Size >= 0 && m.n != req.Size {
		return fmt.Errorf("the content held %d bytes, not the %d announced; nothing was written", m.n, req.Size)
	}
	if _, ok := s.c.HasExtension("fsync@openssh.com"); ok {
		if err := f.Sync(); err != nil {
			return s.failed(ctx, "fsync", err)
		}
	}
	mode := req.Mode.Perm()
	if mode == 0 {
		mode = 0o644
	}
	if err := f.Chmod(mode); err != nil {
		return s.failed(ctx, "chmod", err)
	}
	return nil
}

// rename moves tmp to dest: with overwrite atomically replacing dest where
// the server can, else without replacing an existing file.
func (s *sftpSession) rename(ctx context.Context, tmp, dest string, overwrite bool) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx) // stopped before the destination changed
	}
	_, posix := s.c.HasExtension("posix-rename@openssh.com")
	switch {
	case overwrite && posix:
		if err := s.c.PosixRename(tmp, dest); err != nil {
			return s.failed(ctx, "rename to "+dest, err)
		}
		return nil
	case overwrite:
		// SSH_FXP_RENAME does not replace a file.
		if err := s.c.Remove(dest); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return s.failed(ctx, "remove "+dest+" to replace it", err)
		}
	}
	if err := s.c.Rename(tmp, dest); err != nil {
		if _, serr := s.c.Lstat(dest); serr == nil && !overwrite {
			return &ExistsError{Path: dest} // created while we wrote
		}
		return s.failed(ctx, "rename to "+dest, err)
	}
	return nil
}

// removeTemp removes the temporary file of a failed upload and returns
// cause, saying so when the file may remain.
func (s *sftpSession) removeTemp(tmp string, cause error) error {
	if err := s.c.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (the temporary file %s may remain: %v)", cause, tmp, err)
	}
	return cause
}

// upMeter counts and hashes an upload from its reader, and stops it past
// its limit or when ctx ends.
type upMeter struct {
	ctx      context.Context
	r        io.Reader
	h        hash.Hash
	n, limit int64
	err      error // the limit's or the reader's error, which ends the upload
}

func (m *upMeter) Read(p []byte) (int, error) {
	if err := m.ctx.Err(); err != nil {
		return 0, err
	}
	if m.limit > 0 && int64(len(p)) > m.limit-m.n+1 {
		p = p[:m.limit-m.n+1] // one byte past the limit tells
	}
	n, err := m.r.Read(p)
	m.n += int64(n)
	m.h.Write(p[:n])
	switch {
	case m.limit > 0 && m.n > m.limit:
		m.err = &TooLargeError{Limit: m.limit}
		return n, m.err
	case err != nil && err != io.EOF:
		m.err = fmt.Errorf("read the upload's content: %w", err)
	}
	return n, err
}
