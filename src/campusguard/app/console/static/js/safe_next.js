// The same rule as the server's safe_next (oidc.py): a path on this site ("/x"), never "//host",
// "/\\host", a URL, the login pages, or a path holding a control character or a backslash (a browser
// drops a tab or a line break, so "/\t/evil.example" would become "//evil.example"); then, to be sure,
// the resolved URL must be of this origin.
export function safeNext(next, origin) {
  if (!next || next.length > 2048 || !next.startsWith("/") || next.startsWith("//") || next.startsWith("/\\")) return "/";
  if (next.startsWith("/login") || next.startsWith("/auth/")) return "/";
  if (/[\u0000-\u001f\u007f\\]/.test(next)) return "/";
  let url;
  try {
    url = new URL(next, origin);
  } catch {
    return "/";
  }
  return url.origin === origin ? url.pathname + url.search + url.hash : "/";
}
