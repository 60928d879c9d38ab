// MHD_start_daemon, MHD_get_daemon_info and the other variadic calls, which Swift cannot make: these fix their arguments.
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

/// Called with each request's target as sent (before libmicrohttpd decodes its percent escapes);
/// what it returns is the request's context in the access handler's first call.
typedef void *(*cmhd_uri_log_callback)(void *context, const char *uri, struct MHD_Connection *connection);

/// TLS 1.2 and 1.3 only: GnuTLS's defaults still accept 1.0 and 1.1.
#define CMHD_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/// Starts a daemon on an IPv4 address (port 0: any free port), one thread per connection; with
/// MHD_USE_TLS in `flags`, `certificate` and `key` are the PEM texts (else both NULL).
/// `notify` is told of every connection opened and closed.
static inline struct MHD_Daemon *cmhd_start_daemon(
    unsigned int flags, const struct sockaddr *address, unsigned short port, MHD_AccessHandlerCallback handler,
    MHD_RequestCompletedCallback completed, cmhd_uri_log_callback uriLog, void *context,
    MHD_NotifyConnectionCallback notify, unsigned int connectionLimit, unsigned int perAddressLimit,
    unsigned int timeoutSeconds, size_t connectionMemoryLimit, const char *certificate, const char *key) {
    /* One option list, with the TLS options only when given (MHD_OPTION_ARRAY: integers in `value`,
       single pointers in `ptr_value`, a callback and its argument in both). `address` is a
       sockaddr_in, or a sockaddr_in6 when `flags` has MHD_USE_IPv6. */
    struct MHD_OptionItem options[] = {
        {MHD_OPTION_SOCK_ADDR, 0, (void *)address},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, context},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)uriLog, context},
        {MHD_OPTION_CONNECTION_LIMIT, connectionLimit, NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, perAddressLimit, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, timeoutSeconds, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)connectionMemoryLimit, NULL},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify, context},
        {MHD_OPTION_END, 0, NULL},
        {MHD_OPTION_END, 0, NULL},
        {MHD_OPTION_END, 0, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    if (certificate != NULL && key != NULL) {
        options[8] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)certificate};
        options[9] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key};
        options[10] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)CMHD_TLS_PRIORITIES};
    }
    return MHD_start_daemon(flags, port, NULL, NULL, handler, context, MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

/// The port the daemon listens on (the chosen one when started on port 0), or -1.
static inline int cmhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? (int)info->port : -1;
}

/// Whether libmicrohttpd was built with TLS (GnuTLS); MHD_FEATURE's aliased cases do not import into Swift.
static inline int cmhd_supports_tls(void) {
    return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES;
}

/// The client's numeric address ("127.0.0.1", "::1") into `buffer`; 0, or -1 when it is unknown.
static inline int cmhd_client_address(struct MHD_Connection *connection, char *buffer, size_t size) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL) return -1;
    const struct sockaddr *address = info->client_addr;
    const void *bytes = NULL;
    if (address->sa_family == AF_INET) bytes = &((const struct sockaddr_in *)address)->sin_addr;
    else if (address->sa_family == AF_INET6) bytes = &((const struct sockaddr_in6 *)address)->sin6_addr;
    else return -1;
    return inet_ntop(address->sa_family, bytes, buffer, (socklen_t)size) ? 0 : -1;
}

/// The connection's socket, or -1.
static inline int cmhd_connection_socket(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? (int)info->connect_fd : -1;
}

/// Sets this connection's idle timeout (seconds; 0 would mean none).
static inline void cmhd_set_connection_timeout(struct MHD_Connection *connection, unsigned int seconds) {
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}
