// What the console does first: read /config.json, sign in with the dev sign-in, call the API
// with the token. Each answer is written into the page for the test to read.
const show = (id, text) => { document.getElementById(id).textContent = text; };

const config = await (await fetch("/config.json")).json();
show("config", `${config.auth.mode} api=${JSON.stringify(config.apiUrl)}`);
const signIn = await fetch("/dev/sign-in", {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ user: "smoke", team: "acme", admin: false, teamAdmin: false }),
});
const { idToken, expiresIn } = await signIn.json();
show("who", `smoke (${expiresIn}s)`);
const api = await fetch(`${config.apiUrl}/v1/whoami`, {
  headers: { Authorization: `Bearer ${idToken}` },
});
show("api", `${api.status} ${await api.text()}`);
