// Portcullis browser client: one ES module, no dependencies, no build step.
// Served by the gateway at /client/portcullis.js; documented in clients/js/README.md.
//
// The session id lives in sessionStorage (configurable); tokens live in memory only.
// The agent socket carries its credentials in Sec-WebSocket-Protocol, never in a URL.

const AGENT_PROTOCOL = "portcullis.agent.v1";
const AGENT_PATH = "/api/runtime/agent";

/** An error from the gateway (or the client): `.code` is the stable error code. */
export class PortcullisError extends Error {
  constructor(code, message, status = 0) {
    super(message || code);
    this.name = "PortcullisError";
    this.code = code;
    this.status = status;
  }
}

/** base64url without padding, of a string's UTF-8 or of bytes. */
function base64url(text) {
  const bytes = typeof text === "string" ? new TextEncoder().encode(text) : text;
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A token's `exp` in milliseconds (read, not trusted: the gateway verifies); now when unreadable. */
function tokenExpiry(token) {
  try {
    const payload = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const exp = JSON.parse(atob(payload + "===".slice((payload.length + 3) % 4))).exp;
    return typeof exp === "number" ? exp * 1000 : Date.now();
  } catch (_) {
    return Date.now();
  }
}

/**
 * The session being started, per gateway and storage key, for the whole page:
 * however many clients (components) call start(), one anonymous session is made.
 */
const pageStarts = new Map();

/** How long a socket must stay open before a later drop starts the backoff from the beginning again. */
const STABLE_OPEN_MS = 5000;

/** The client: the session, the tokens, and the agent socket. */
export class PortcullisClient extends EventTarget {
  /**
   * @param {object} [options]
   * @param {string} [options.baseUrl] the gateway's origin; same origin when omitted
   * @param {Storage} [options.storage] where the session id is kept (sessionStorage)
   * @param {string} [options.storageKey] its key ("portcullis.session_id")
   */
  constructor({ baseUrl = "", storage = globalThis.sessionStorage, storageKey = "portcullis.session_id" } = {}) {
    super();
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.storage = storage;
    this.storageKey = storageKey;
    this.session = null;
    this._tokens = null; // {accessToken, refreshToken, expiresAt}
    this._starting = null;
    this._refreshTimer = null;
    this._refreshing = null;
    this._agent = null;
    this._closed = false;
  }

  // --- HTTP -------------------------------------------------------------

  async _call(method, path, { body, bearer = false, headers = {} } = {}) {
    const init = { method, headers: { ...headers }, credentials: "omit", cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    if (bearer && this._tokens) init.headers["Authorization"] = `Bearer ${this._tokens.accessToken}`;
    let response;
    try {
      response = await fetch(this.baseUrl + path, init);
    } catch (error) {
      throw new PortcullisError("network_error", "the gateway cannot be reached; check the connection and try again");
    }
    if (response.status === 204) return null;
    let json = null;
    try {
      json = await response.json();
    } catch (_) {
      json = null;
    }
    if (!response.ok) {
      throw new PortcullisError(json?.error || "unexpected_status", json?.message || `the gateway answered ${response.status}`, response.status);
    }
    return json;
  }

  _setSession(session, reason) {
    this.session = session;
    if (session && session.session_id) this.storage?.setItem(this.storageKey, session.session_id);
    else this.storage?.removeItem(this.storageKey);
    this.dispatchEvent(new CustomEvent("session", { detail: { session, reason } }));
  }

  // --- The session ------------------------------------------------------

  /**
   * The session for this page: the stored one if the gateway says it is live,
   * else one new anonymous session, made by the server (never invented here).
   * However many components call it, one session is made per page load.
   */
  start() {
    if (!this._starting) {
      const key = this._pageKey();
      let shared = pageStarts.get(key);
      if (!shared) {
        shared = this._start();
        pageStarts.set(key, shared);
        shared.catch(() => pageStarts.delete(key)); // a failed start may be tried again
      }
      this._starting = shared.then(({ session, reason }) => {
        this._setSession(session, reason);
        return session;
      });
      this._starting.catch(() => {
        this._starting = null;
      });
    }
    return this._starting;
  }

  _pageKey() {
    return `${this.baseUrl}|${this.storageKey}`;
  }

  async _start() {
    const completed = await this._completeProviderLogin();
    if (completed) return completed;
    const stored = this.storage?.getItem(this.storageKey);
    if (stored) {
      try {
        const session = await this._call("GET", `/api/session/${encodeURIComponent(stored)}`);
        if (session && session.state === "anonymous") return { session, reason: "restored" };
      } catch (error) {
        if (error.code === "network_error") throw error;
        // Not live, or signed in by a page whose tokens are gone: start afresh.
      }
    }
    const session = await this._call("POST", "/api/session/create-anonymous");
    return { session, reason: "created" };
  }

  /** A new anonymous session after the old one ended (one at a time). */
  _restart(reason) {
    this._forgetTokens();
    this.storage?.removeItem(this.storageKey);
    const shared = this._call("POST", "/api/session/create-anonymous").then((session) => ({ session, reason }));
    pageStarts.set(this._pageKey(), shared);
    this._starting = null;
    return this.start();
  }

  /**
   * Signs in, upgrading the current session in place.
   * Rejects with a PortcullisError whose `.code` is the gateway's error code.
   */
  async login({ username, password, tenant } = {}) {
    const session = await this.start();
    const body = { username, password, session_id: session.session_id };
    if (tenant) body.tenant = tenant;
    const answer = await this._call("POST", "/api/auth/login", { body });
    this._takeTokens(answer);
    const upgraded = await this._call("GET", `/api/session/${encodeURIComponent(answer.session_id)}`, { bearer: true });
    this._setSession(upgraded, "upgraded");
    return upgraded;
  }

  // --- Signing in through a provider ------------------------------------

  /** The providers users may sign in through: [{name, display_name, issuer}]. */
  async providers() {
    const answer = await this._call("GET", "/api/auth/providers");
    return answer?.providers ?? [];
  }

  /**
   * Signs in through the provider `name` (OpenID Connect code flow with PKCE, run by the
   * gateway): keeps a fresh verifier in sessionStorage for the round trip only, asks the
   * gateway to start, and navigates to the provider. The page comes back to `returnTo` (this
   * page by default), where start() completes the sign-in.
   */
  async loginWithProvider(name, { returnTo } = {}) {
    const session = await this.start();
    const bytes = new Uint8Array(32);
    globalThis.crypto.getRandomValues(bytes);
    const verifier = base64url(bytes);
    const challenge = base64url(new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
    const back = returnTo ?? globalThis.location.href.split("#")[0];
    const answer = await this._call("POST", `/api/auth/oidc/${encodeURIComponent(name)}/start`, {
      body: { session_id: session.session_id, return_to: back, login_challenge: challenge },
    });
    this.storage?.setItem(this._verifierKey(), verifier);
    globalThis.location.assign(answer.authorization_url);
  }

  _verifierKey() {
    return `${this.storageKey}.login_verifier`;
  }

  /**
   * A sign-in the provider sent back in the location's fragment (#portcullis_login= or
   * #portcullis_error=): the fragment leaves the address bar and history at once, the verifier
   * leaves storage, and the code is redeemed for this session. `null` when there is none.
   */
  async _completeProviderLogin() {
    const location = globalThis.location;
    if (!location || !location.hash) return null;
    const fields = new URLSearchParams(location.hash.slice(1));
    const code = fields.get("portcullis_login");
    const error = fields.get("portcullis_error");
    if (!code && !error) return null;
    globalThis.history?.replaceState(globalThis.history.state, "", location.href.split("#")[0]);
    const verifier = this.storage?.getItem(this._verifierKey());
    this.storage?.removeItem(this._verifierKey());
    const stored = this.storage?.getItem(this.storageKey);
    if (error || !verifier || !stored) {
      this.loginError = error || "login_state_missing";
      return null; // the stored anonymous session carries on
    }
    try {
      const answer = await this._call("POST", "/api/auth/oidc/complete", {
        body: { login_code: code, session_id: stored, login_verifier: verifier },
      });
      this._takeTokens(answer);
      const session = await this._call("GET", `/api/session/${encodeURIComponent(answer.session_id)}`, { bearer: true });
      return { session, reason: "upgraded" };
    } catch (failure) {
      if (failure.code === "network_error") throw failure;
      this._forgetTokens();
      this.loginError = failure.code;
      return null;
    }
  }

  /**
   * Signs in with an access token the page got from its identity provider (an issuer the
   * gateway trusts, `trust.issuers`): upgrades the current session in place, and the socket
   * opens as after a login. Nothing is refreshed for such a token: call this again with a
   * fresh one before it expires (an open socket is renewed with it). When it expires, or the
   * gateway refuses it, the client emits `session` with reason `token_expired` and starts a
   * new anonymous session. Rejects with a PortcullisError whose `.code` is the gateway's.
   */
  async signInWithToken(accessToken) {
    const session = await this.start();
    const previous = this._tokens;
    this._takeProviderToken(accessToken);
    let upgraded;
    try {
      upgraded = await this._call("PATCH", `/api/session/${encodeURIComponent(session.session_id)}/upgrade`, { body: {}, bearer: true });
    } catch (error) {
      if (previous) this._tokens = previous;
      else this._forgetTokens();
      throw error;
    }
    if (this.session?.state === "authenticated" && this.session.session_id === upgraded.session_id) {
      this.session = upgraded;
      this._agent?._renew(); // the same session with a fresher token: the open socket takes it
    } else {
      this._setSession(upgraded, "upgraded");
    }
    return upgraded;
  }

  /**
   * Logs out: the session ends, the socket closes with 1000 and does not reconnect, the session
   * is forgotten. With `{ provider: true }`, a session signed in through a provider with an
   * end-session endpoint also navigates there, ending the provider's session.
   */
  async logout({ provider = false } = {}) {
    const session = this.session;
    this._agent?._stop(1000, "logged out");
    let answer = null;
    if (session && this._tokens) {
      try {
        answer = await this._call("POST", "/api/auth/logout", { body: { session_id: session.session_id }, bearer: true });
      } catch (error) {
        if (error.code !== "token_revoked" && error.code !== "session_not_found") throw error;
      }
    }
    this._forgetTokens();
    this._starting = null;
    pageStarts.delete(this._pageKey());
    this._setSession(null, "ended");
    if (provider && answer?.end_session_url) globalThis.location.assign(answer.end_session_url);
  }

  /** Stops timers and the socket; no network call. */
  close() {
    this._closed = true;
    this._agent?._stop(1000, "client closed");
    clearTimeout(this._refreshTimer);
  }

  // --- Tokens -----------------------------------------------------------

  _takeTokens(answer) {
    // Refresh at about 80% of the token's life, at least a second before it ends.
    const delay = Math.max(1000, Math.min(answer.expires_in * 800, answer.expires_in * 1000 - 1000));
    this._tokens = {
      accessToken: answer.access_token,
      refreshToken: answer.refresh_token,
      expiresAt: Date.now() + answer.expires_in * 1000,
      refreshAt: Date.now() + delay,
    };
    clearTimeout(this._refreshTimer);
    if (!this._closed) this._refreshTimer = setTimeout(() => this.refresh().catch(() => {}), delay);
  }

  /** A provider's token: no refresh token; the client's sign-in ends at its `exp`. */
  _takeProviderToken(accessToken) {
    const expiresAt = tokenExpiry(accessToken);
    this._tokens = { accessToken, refreshToken: null, expiresAt, refreshAt: expiresAt, provider: true };
    clearTimeout(this._refreshTimer);
    // A second before exp (the gateway closes the socket at exp): the sign-in has ended.
    const delay = Math.max(0, expiresAt - 1000 - Date.now());
    if (!this._closed) this._refreshTimer = setTimeout(() => this._sessionEnded("token_expired").catch(() => {}), delay);
  }

  /** True when the access token is due for its refresh (or overdue: the refresh keeps failing). */
  _tokenDue() {
    return !this._tokens || Date.now() >= Math.min(this._tokens.refreshAt, this._tokens.expiresAt - 1000);
  }

  _forgetTokens() {
    this._tokens = null;
    clearTimeout(this._refreshTimer);
  }

  /** Rotates the tokens now (one refresh at a time) and renews them on the open socket. */
  refresh() {
    if (!this._refreshing) {
      this._refreshing = (async () => {
        if (!this._tokens) throw new PortcullisError("token_missing", "log in first");
        if (this._tokens.provider) {
          // Nothing to refresh: a provider's token ends here; the page signs in again with a fresh one.
          await this._sessionEnded("token_expired");
          throw new PortcullisError("token_expired", "the identity provider's token ended; sign in with a fresh one");
        }
        try {
          const answer = await this._call("POST", "/api/auth/refresh", { body: { refresh_token: this._tokens.refreshToken } });
          this._takeTokens(answer);
          this._agent?._renew();
          return answer;
        } catch (error) {
          if (error.status === 401) await this._sessionEnded((await this._sessionGone()) ? "session_ended" : "refresh_refused");
          else this._retryRefreshSoon(); // the gateway or the Runtime is away: try again shortly
          throw error;
        }
      })().finally(() => {
        this._refreshing = null;
      });
    }
    return this._refreshing;
  }

  /** Whether the gateway says the current session has ended (a logout or revocation elsewhere). */
  async _sessionGone() {
    try {
      const session = await this._call("GET", `/api/session/${encodeURIComponent(this.session.session_id)}`);
      return session?.state !== "authenticated";
    } catch (error) {
      return error.code === "session_not_found";
    }
  }

  _retryRefreshSoon() {
    clearTimeout(this._refreshTimer);
    if (!this._closed && this._tokens) {
      this._refreshTimer = setTimeout(() => this.refresh().catch(() => {}), 1000 + Math.random() * 2000);
    }
  }

  async _sessionEnded(reason) {
    this._agent?._stop(1000, "session ended");
    await this._restart(reason);
  }

  // --- The agent socket ---------------------------------------------------

  /** The agent socket (one per client); it connects once the session is authenticated. */
  agent() {
    if (!this._agent) this._agent = new AgentSocket(this);
    return this._agent;
  }
}

/** The agent socket: connects only when the session is authenticated, reconnects with reason. */
export class AgentSocket extends EventTarget {
  constructor(client) {
    super();
    this.client = client;
    this.socket = null;
    this.state = "waiting"; // waiting | connecting | open | stopped
    this._attempt = 0;
    this._pending = new Map();
    /** Requests made before the socket opened: each sends itself on "open", or is refused by `_stop`. */
    this._waiting = new Set();
    this._counter = 0;
    this._stopped = false;
    this._onSession = () => this._maybeConnect();
    client.addEventListener("session", this._onSession);
    this._maybeConnect();
  }

  _ready() {
    const c = this.client;
    return c.session && c.session.state === "authenticated" && c._tokens;
  }

  _maybeConnect() {
    if (this._stopped || this.socket || this.state === "connecting" || !this._ready()) return;
    this._connect();
  }

  _connect() {
    const c = this.client;
    this.state = "connecting";
    const origin = c.baseUrl || globalThis.location.origin;
    const url = origin.replace(/^http/, "ws") + AGENT_PATH;
    const openedWith = c._tokens.accessToken;
    const protocols = [AGENT_PROTOCOL, `base64url.bearer.${base64url(openedWith)}`, `portcullis.session.${c.session.session_id}`];
    const socket = new WebSocket(url, protocols);
    this.socket = socket;
    socket.onopen = () => {
      this.state = "open";
      // Tokens refreshed while the socket was connecting were not renewed on it (it was not
      // open): renew now, or the gateway closes it with 1008 when the older token expires.
      if (c._tokens && c._tokens.accessToken !== openedWith) this._renew();
      // A socket that opens and drops at once (the Runtime is away) must not restart the backoff.
      this._stableTimer = setTimeout(() => {
        this._attempt = 0;
      }, STABLE_OPEN_MS);
      this.dispatchEvent(new Event("open"));
    };
    socket.onmessage = (event) => this._message(event);
    socket.onerror = () => this.dispatchEvent(new Event("error"));
    socket.onclose = (event) => this._closed(event);
  }

  _message(event) {
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch (_) {
      frame = null;
    }
    if (frame && frame.type === "result" && this._pending.has(frame.request_id)) {
      const { resolve, reject, timer } = this._pending.get(frame.request_id);
      this._pending.delete(frame.request_id);
      clearTimeout(timer);
      if (frame.status === "failed") reject(new PortcullisError(frame.error?.error || "intent_failed", frame.error?.message));
      else resolve(frame.result);
    }
    this.dispatchEvent(new MessageEvent("message", { data: frame ?? event.data }));
  }

  _failPending(code, message) {
    for (const { reject, timer } of this._pending.values()) {
      clearTimeout(timer);
      reject(new PortcullisError(code, message));
    }
    this._pending.clear();
  }

  async _closed(event) {
    this.socket = null;
    clearTimeout(this._stableTimer);
    this._failPending("socket_closed", "the agent socket closed before the answer came");
    this.dispatchEvent(new CloseEvent("close", { code: event.code, reason: event.reason, wasClean: event.wasClean }));
    if (this._stopped) {
      this.state = "stopped";
      return;
    }
    this.state = "waiting";
    if (!this._ready()) return; // it connects again once the session is authenticated
    await this._recover(event);
  }

  /** After an unexplained close: ask the gateway why (a plain GET of the socket path), then act on it. */
  async _recover(event) {
    const c = this.client;
    for (;;) {
      if (this._stopped || !this._ready()) return;
      this._attempt += 1;
      const delay = Math.min(30000, 500 * 2 ** Math.min(this._attempt - 1, 6));
      await sleep(delay / 2 + Math.random() * (delay / 2));
      if (this._stopped || !this._ready()) return;
      try {
        await c._call("GET", AGENT_PATH, { bearer: true, headers: { "X-Session-Id": c.session.session_id } });
      } catch (error) {
        if (error.code === "upgrade_required") {
          // 426: the gateway would admit this socket now. A token due for its refresh is
          // refreshed first: the gateway closes a socket (1008) when its token expires, and
          // after an outage the token may have moments left.
          if (c._tokenDue()) {
            try {
              await c.refresh();
            } catch (_) {
              continue; // refused (the session ended; _ready() is false now) or unavailable: back off
            }
            if (this._stopped || !this._ready() || this.socket) return;
          }
          this._connect();
          return;
        }
        if (error.code === "token_invalid" || error.code === "token_missing") {
          try {
            await c.refresh();
          } catch (_) {
            // A refused refresh ended the session (the client reported it; _ready() is false
            // now); any other failure backs off and asks again.
          }
          continue;
        }
        if (error.code === "session_not_found" || error.code === "token_revoked") {
          await c._sessionEnded("session_ended");
          return;
        }
        if (error.code === "session_forbidden" || error.code === "session_anonymous" || error.code === "origin_forbidden") {
          this._stopped = true;
          this.state = "stopped";
          this.dispatchEvent(new CustomEvent("error", { detail: error }));
          return;
        }
        // Unavailable, rate limited or unreachable: back off and ask again.
        continue;
      }
      // A plain GET is never admitted; an answer other than a refusal is unexpected: back off.
    }
  }

  _renew() {
    if (this.socket && this.state === "open" && this.client._tokens) {
      this.socket.send(JSON.stringify({ type: "auth.renew", access_token: this.client._tokens.accessToken }));
    }
  }

  /**
   * Sends an intent; resolves with its result, rejects with `.code` on a failed one. Made before
   * the socket is open (right after `client.agent()`, or while it reconnects), it waits for the
   * socket to open, within the same `timeoutMs`.
   */
  request(intentType, payload = {}, { timeoutMs = 30000 } = {}) {
    return new Promise((resolve, reject) => {
      if (this._stopped) {
        reject(new PortcullisError("socket_closed", "this agent socket was closed (logout or close()); get a new one with client.agent()"));
        return;
      }
      const requestId = `r${++this._counter}`;
      const waiter = { send: null, reject };
      const timer = setTimeout(() => {
        this._pending.delete(requestId);
        this._waiting.delete(waiter);
        if (waiter.send) this.removeEventListener("open", waiter.send);
        reject(new PortcullisError("timeout", waiter.send ? "the agent socket did not open in time; is the session signed in?" : "no answer from the Runtime in time"));
      }, timeoutMs);
      const send = () => {
        this._waiting.delete(waiter);
        waiter.send = null;
        this._pending.set(requestId, { resolve, reject, timer });
        this.socket.send(JSON.stringify({ type: "intent", request_id: requestId, intent_type: intentType, payload }));
      };
      if (this.socket && this.state === "open") {
        send();
      } else {
        waiter.send = send;
        waiter.timer = timer;
        this._waiting.add(waiter);
        this.addEventListener("open", send, { once: true });
      }
    });
  }

  _stop(code, reason) {
    this._stopped = true;
    this.state = "stopped";
    for (const waiter of this._waiting) {
      clearTimeout(waiter.timer);
      if (waiter.send) this.removeEventListener("open", waiter.send);
      waiter.reject(new PortcullisError("socket_closed", "the agent socket was closed before it opened"));
    }
    this._waiting.clear();
    this.client.removeEventListener("session", this._onSession);
    this.client._agent = null;
    if (this.socket) this.socket.close(code, reason);
  }
}
