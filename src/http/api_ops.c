/* api_ops.c: operations endpoints (CONTRACT.md section 7): /healthz, /readyz, /drain. */
#include "sh/http.h"
#include "sh/log.h"

SH_CAPABILITY(drain, "drain")

void sh_api_healthz(sh_request *r)
{
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "status", "ok");
        cJSON_AddStringToObject(o, "version", SH_VERSION "+" SH_GIT_COMMIT);
        cJSON_AddItemToObject(o, "capabilities", sh_capabilities_json());
        sh_reply_json(r, 200, o);
}

void sh_api_readyz(sh_request *r)
{
        sh_manager *m = sh_server_manager(r->srv);
        cJSON *o;

        if (sh_manager_draining(m)) {
                sh_reply_errorf(r, 503, "Unavailable", "the host is draining");
                return;
        }
        if (sh_manager_full(m)) {
                sh_reply_errorf(r, 503, "Unavailable", "the host is at capacity");
                return;
        }
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "ready");
        sh_reply_json(r, 200, o);
}

void sh_api_drain(sh_request *r)
{
        sh_manager *m = sh_server_manager(r->srv);
        cJSON *o;

        if (!sh_manager_draining(m))
                log_info("draining", NULL, "no new sandboxes are accepted from now on");
        sh_manager_set_draining(m, true);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "sandboxes", sh_manager_count(m));
        cJSON_AddNumberToObject(o, "persisted", 0);
        cJSON_AddNumberToObject(o, "failed", 0);
        sh_reply_json(r, 200, o);
}
