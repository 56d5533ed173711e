#!/bin/bash
# The local stack's changes to the realm imported from deploy/keycloak/realm-export.json, made
# with Keycloak's admin CLI by the one-shot `keycloak-setup` service of compose.yaml. Safe to run
# again. For this local stack only: a real installation keeps the exported realm's settings,
# regenerates the client secrets and has real people.
#
# 1. The portal client `gpu-portal` redirects to the local portal ($PORTAL_URL) and has the
#    secret the portal is given ($OIDC_CLIENT_SECRET); the directory sync's client
#    `gpu-portal-sync` has $KEYCLOAK_ADMIN_CLIENT_SECRET.
# 2. The demo's tenants `vision` and `nlp` get their groups (the portal's directory sync would
#    make the same ones when the tenants are created in the portal).
# 3. The demo's people, each with the password $DEMO_PASSWORD: admin and finance (client roles
#    of `gpu-portal`), lead (leads of vision and nlp), developer (developers of vision) and
#    nlp-dev (developers of nlp).
set -euo pipefail

REALM=gpu-portal
CONFIG=/tmp/kcadm.config

kcadm() {
    /opt/keycloak/bin/kcadm.sh "$@" --config "$CONFIG"
}

id_of() {  # the id of the first object at $1 matching the queries that follow, or nothing
    local path=$1
    shift
    kcadm get "$path" -r "$REALM" "$@" --fields id --format csv --noquotes | head -n 1
}

kcadm config credentials --server "$KEYCLOAK_URL" --realm master \
    --user "$KEYCLOAK_ADMIN_USERNAME" --password "$KEYCLOAK_ADMIN_PASSWORD"

# 1. The clients.
portal_client=$(id_of clients -q clientId=gpu-portal)
kcadm update "clients/$portal_client" -r "$REALM" --merge -f - <<JSON
{
  "rootUrl": "$PORTAL_URL",
  "redirectUris": ["$PORTAL_URL/accounts/oidc/callback/"],
  "attributes": {"post.logout.redirect.uris": "$PORTAL_URL/*"},
  "secret": "$OIDC_CLIENT_SECRET"
}
JSON
sync_client=$(id_of clients -q clientId=gpu-portal-sync)
kcadm update "clients/$sync_client" -r "$REALM" -s "secret=$KEYCLOAK_ADMIN_CLIENT_SECRET"

# 2. The tenants' groups, below /gpu-portal/tenants (which the realm export has).
group_ensure() {  # parent id, name: prints the child group's id, creating it when missing
    local parent=$1 name=$2 found
    found=$(kcadm get "groups/$parent/children" -r "$REALM" -q first=0 -q max=1000 \
        --fields id,name --format csv --noquotes | awk -F, -v name="$name" '$2 == name {print $1}')
    if [ -z "$found" ]; then
        found=$(kcadm create "groups/$parent/children" -r "$REALM" -s "name=$name" -i)
    fi
    echo "$found"
}
tenants_group=$(kcadm get group-by-path/gpu-portal/tenants -r "$REALM" --fields id \
    --format csv --noquotes)
for tenant in vision nlp; do
    tenant_group=$(group_ensure "$tenants_group" "$tenant")
    group_ensure "$tenant_group" leads >/dev/null
    group_ensure "$tenant_group" developers >/dev/null
done

# 3. The people: username, first name, last name, client role, groups.
person() {
    local username=$1 first=$2 last=$3 role=$4 user group
    shift 4
    user=$(id_of users -q "username=$username" -q exact=true)
    if [ -z "$user" ]; then
        user=$(kcadm create users -r "$REALM" -i -s "username=$username" -s enabled=true \
            -s "firstName=$first" -s "lastName=$last" -s "email=$username@example.org" \
            -s emailVerified=true)
    fi
    kcadm set-password -r "$REALM" --userid "$user" --new-password "$DEMO_PASSWORD"
    if [ -n "$role" ]; then
        kcadm add-roles -r "$REALM" --uid "$user" --cclientid gpu-portal --rolename "$role"
    fi
    for path in "$@"; do
        group=$(kcadm get "group-by-path$path" -r "$REALM" --fields id --format csv --noquotes)
        kcadm update "users/$user/groups/$group" -r "$REALM" -n \
            -s "realm=$REALM" -s "userId=$user" -s "groupId=$group"
    done
    echo "demo account: $username"
}
person admin Ada Admin admin
person finance Fin Ance finance
person lead Lee Lead "" /gpu-portal/tenants/vision/leads /gpu-portal/tenants/nlp/leads
person developer Dana Developer "" /gpu-portal/tenants/vision/developers
person nlp-dev Nia Developer "" /gpu-portal/tenants/nlp/developers
