//! Redaction by family (issue 12 item 5): what the suggestion model must never see, and
//! near-misses that stay as they are.

use super::super::{looks_like_secret, redact_secrets};

/// Each `(text, redacted)` pair; a text equal to its redaction must not look like a secret.
fn check(cases: &[(&str, &str)]) {
    for &(text, redacted) in cases {
        assert_eq!(redact_secrets(text), redacted, "{text:?}");
        assert_eq!(looks_like_secret(text), text != redacted, "{text:?}");
    }
}

#[test]
fn assignments_to_secret_named_variables() {
    check(&[
        (
            "export DB_PASSWORD=hunter2",
            "export DB_PASSWORD=[REDACTED]",
        ),
        ("MYSQL_PWD=pw mysql", "MYSQL_PWD=[REDACTED] mysql"),
        (
            "export SMTP_PASSWD='a b'",
            "export SMTP_PASSWD='[REDACTED]'",
        ),
        ("JWT_SECRET=s3 node app", "JWT_SECRET=[REDACTED] node app"),
        ("export NPM_TOKEN=abc", "export NPM_TOKEN=[REDACTED]"),
        ("STRIPE_KEY=k1 make", "STRIPE_KEY=[REDACTED] make"),
        (
            "export GCP_CREDENTIALS=c",
            "export GCP_CREDENTIALS=[REDACTED]",
        ),
        ("BASIC_AUTH=u:p ./run", "BASIC_AUTH=[REDACTED] ./run"),
        ("a && DB_PASS=x ./m", "a && DB_PASS=[REDACTED] ./m"),
        (
            "docker run -e \"API_KEY=k\" img",
            "docker run -e \"API_KEY=[REDACTED]\" img",
        ),
        // near-misses: references, other names, the working directory, tokens counted
        ("export DB_PASSWORD=$PW", "export DB_PASSWORD=$PW"),
        (
            "export TOKEN=\"$(pass show t)\"",
            "export TOKEN=\"$(pass show t)\"",
        ),
        ("export PWD=/tmp OLDPWD=/", "export PWD=/tmp OLDPWD=/"),
        ("MONKEY=1 OAUTH_URL=x ./a", "MONKEY=1 OAUTH_URL=x ./a"),
        ("SSH_AUTH_SOCK=/tmp/s ssh h", "SSH_AUTH_SOCK=/tmp/s ssh h"),
        ("make MAX_TOKENS=100", "make MAX_TOKENS=100"),
        ("export DB_PASSWORD= x", "export DB_PASSWORD= x"),
    ]);
}

#[test]
fn password_options_and_arguments_of_common_clients() {
    check(&[
        (
            "mysql -u root -pHunter2secret db",
            "mysql -u root -p[REDACTED] db",
        ),
        (
            "mysqldump -uroot -p'pw 1' db",
            "mysqldump -uroot -p'[REDACTED]' db",
        ),
        (
            "mysql --password=hunter2 db",
            "mysql --password=[REDACTED] db",
        ),
        ("app --db-token=t1", "app --db-token=[REDACTED]"),
        (
            "curl -u admin:hunter2 https://x",
            "curl -u admin:[REDACTED] https://x",
        ),
        (
            "curl -uadmin:hunter2 https://x",
            "curl -uadmin:[REDACTED] https://x",
        ),
        (
            "curl --user 'admin:hunter2' https://x",
            "curl --user 'admin:[REDACTED]' https://x",
        ),
        (
            "curl --user=a:b https://x",
            "curl --user=a:[REDACTED] https://x",
        ),
        (
            "/usr/bin/curl -s -U p:q x",
            "/usr/bin/curl -s -U p:[REDACTED] x",
        ),
        ("http -a bob:pw GET x", "http -a bob:[REDACTED] GET x"),
        ("sshpass -p hunter2 ssh h", "sshpass -p [REDACTED] ssh h"),
        (
            "sudo sshpass -phunter2 scp a h:",
            "sudo sshpass -p[REDACTED] scp a h:",
        ),
        ("redis-cli -a pw ping", "redis-cli -a [REDACTED] ping"),
        // near-misses: a prompt, a user without password, other programs' -u and -p
        ("mysql -u root -p db", "mysql -u root -p db"),
        ("curl -u admin https://x", "curl -u admin https://x"),
        ("docker run -u 1000:1000 img", "docker run -u 1000:1000 img"),
        ("mkdir -p a/b && cp -p x y", "mkdir -p a/b && cp -p x y"),
        ("echo mysql; ssh -p 22 h", "echo mysql; ssh -p 22 h"),
        ("curl -u \"$CREDS\" x", "curl -u \"$CREDS\" x"),
        ("mysql --password db", "mysql --password db"),
        (
            "docker login --password-stdin",
            "docker login --password-stdin",
        ),
    ]);
}

#[test]
fn url_userinfo() {
    check(&[
        (
            "git clone https://bob:hunter2@example.com/r.git",
            "git clone https://bob:[REDACTED]@example.com/r.git",
        ),
        (
            "psql postgres://app:p@db/app",
            "psql postgres://app:[REDACTED]@db/app",
        ),
        (
            "redis-cli -u 'redis://:pw@h:6379'",
            "redis-cli -u 'redis://:[REDACTED]@h:6379'",
        ),
        // near-misses: a user alone, a port, an `@` in the path, a variable
        ("ssh://git@github.com/o/r", "ssh://git@github.com/o/r"),
        ("https://h:8080/a@b", "https://h:8080/a@b"),
        ("https://u:$PW@h/x", "https://u:$PW@h/x"),
    ]);
}

#[test]
fn query_parameters_with_secret_names() {
    check(&[
        (
            "curl 'https://x/api?access_token=abc&page=2'",
            "curl 'https://x/api?access_token=[REDACTED]&page=2'",
        ),
        (
            "curl https://x/?a=1&token=t#f",
            "curl https://x/?a=1&token=[REDACTED]#f",
        ),
        (
            "wget https://maps.x/v1?key=k1",
            "wget https://maps.x/v1?key=[REDACTED]",
        ),
        (
            "curl \"https://b.s3.x/o?X-Amz-Credential=c&X-Amz-Signature=s\"",
            "curl \"https://b.s3.x/o?X-Amz-Credential=[REDACTED]&X-Amz-Signature=[REDACTED]\"",
        ),
        (
            "https://a.blob.x/c?sv=1&sig=s1",
            "https://a.blob.x/c?sv=1&sig=[REDACTED]",
        ),
        (
            "open http://h/login?password=p",
            "open http://h/login?password=[REDACTED]",
        ),
        // near-misses
        (
            "curl 'https://x/?page=2&sort=key'",
            "curl 'https://x/?page=2&sort=key'",
        ),
        ("curl https://x/?monkey=1", "curl https://x/?monkey=1"),
        ("curl https://x/?token=$T", "curl https://x/?token=$T"),
        ("ls file?.txt", "ls file?.txt"),
    ]);
}

#[test]
fn known_token_shapes() {
    let google = format!("AIza{}", "Sy0123456789abcdefghijklmnopqrstuvw");
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl";
    let hf = format!("hf_{}", "a".repeat(34));
    let shopify = format!("shpat_{}", "0f".repeat(16));
    let pypi = format!("pypi-AgEIcHlwaS5vcmc{}", "x".repeat(40));
    let gitlab = "glptt-0123456789abcdefghij";
    let oauth = "ya29.a0AfH6SMBx0123456789abcdefgh";
    let sendgrid = format!("SG.{}.{}", "a".repeat(22), "b".repeat(43));
    for token in [
        google.as_str(),
        jwt,
        hf.as_str(),
        shopify.as_str(),
        pypi.as_str(),
        gitlab,
        oauth,
        sendgrid.as_str(),
    ] {
        let line = format!("deploy --with {token} now");
        assert_eq!(
            redact_secrets(&line),
            "deploy --with [REDACTED] now",
            "{token}"
        );
    }
    check(&[
        // near-misses: too short, glued to other text, a base64 string that is no JWT
        ("AIzaShort", "AIzaShort"),
        ("hf_cache_dir", "hf_cache_dir"),
        ("xeyJhbGciOiJIUzI1NiJ9.eyJ", "xeyJhbGciOiJIUzI1NiJ9.eyJ"),
        ("echo eyJhbGciOiJIUzI1NiJ9", "echo eyJhbGciOiJIUzI1NiJ9"),
        ("shpat_abc", "shpat_abc"),
    ]);
}
