# shellcheck shell=bash
# Sourced, not run: `. .ci/keyring.sh` starts a private D-Bus session bus and an
# unlocked gnome-keyring Secret Service in a temporary directory, exports
# DBUS_SESSION_BUS_ADDRESS (and ACTIONGW_TEST_SECRET_SERVICE=1, which turns on
# the keyring integration tests), and defines keyring_stop, which ends both
# daemons by PID and removes the directory. Call it from a trap:
#
#	. .ci/keyring.sh || exit 1
#	trap keyring_stop EXIT
#
# Nothing of the caller's own keyring is touched: the daemons get their own
# HOME and XDG directories, and the bus has no service activation, so only the
# daemon started here can answer as the Secret Service. The caller's HOME is
# left alone (Go's build and module caches live under it).

keyring_stop() {
	local pid
	for pid in "${KEYRING_DAEMON_PID-}" "${KEYRING_DBUS_PID-}"; do
		[ -n "$pid" ] || continue
		kill "$pid" 2>/dev/null || true
		# Wait up to 5 s, then force: a stuck daemon must not hold up CI.
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
	if [ -n "${KEYRING_DIR-}" ]; then
		rm -rf -- "$KEYRING_DIR"
	fi
	unset KEYRING_DAEMON_PID KEYRING_DBUS_PID KEYRING_DIR DBUS_SESSION_BUS_ADDRESS ACTIONGW_TEST_SECRET_SERVICE
}

_keyring_start() {
	local prog dir i
	for prog in dbus-daemon dbus-send gnome-keyring-daemon; do
		if ! command -v "$prog" >/dev/null; then
			echo "keyring.sh: $prog not found (apt-get install dbus-daemon gnome-keyring)" >&2
			return 1
		fi
	done

	dir=$(mktemp -d "${TMPDIR:-/tmp}/actiongw-keyring.XXXXXX") || return 1
	KEYRING_DIR=$dir
	mkdir -m 700 "$dir/home" "$dir/data" "$dir/config" "$dir/cache" "$dir/run" || return 1

	cat >"$dir/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$dir/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF

	# --fork --print-pid returns once the bus is listening.
	KEYRING_DBUS_PID=$(dbus-daemon --config-file="$dir/bus.conf" --fork --print-pid --nopidfile --nosyslog) || {
		echo "keyring.sh: dbus-daemon failed to start" >&2
		return 1
	}
	export DBUS_SESSION_BUS_ADDRESS="unix:path=$dir/bus"

	# --unlock reads the password from stdin and creates the "login" keyring
	# with it if there is none; the password is thrown away with the directory.
	head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' |
		env HOME="$dir/home" XDG_DATA_HOME="$dir/data" XDG_CONFIG_HOME="$dir/config" \
			XDG_CACHE_HOME="$dir/cache" XDG_RUNTIME_DIR="$dir/run" \
			gnome-keyring-daemon --foreground --unlock --components=secrets \
			--control-directory="$dir/run/keyring" >"$dir/gnome-keyring.log" 2>&1 &
	KEYRING_DAEMON_PID=$!

	for i in $(seq 1 100); do
		if dbus-send --session --print-reply --dest=org.freedesktop.DBus / \
			org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null |
			grep -q 'boolean true'; then
			export ACTIONGW_TEST_SECRET_SERVICE=1
			return 0
		fi
		if ! kill -0 "$KEYRING_DAEMON_PID" 2>/dev/null; then
			break
		fi
		sleep 0.1
	done
	echo "keyring.sh: gnome-keyring-daemon did not take the Secret Service name; its log:" >&2
	cat "$dir/gnome-keyring.log" >&2
	return 1
}

_keyring_start || {
	keyring_stop
	false
}
